package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay"
)

const relayDB = "relay.db"

// backupFiles are what a backup copies from the data folder: the two
// databases (as consistent copies, the relay's with its log) and the two
// secrets.
var (
	backupDBs     = []string{"directory.db", relayDB}
	backupSecrets = []string{"jwt_secret", "internal_secret"}
)

func backupCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "backup",
		Usage:     "copy the databases and secrets of a data folder, while serve runs",
		ArgsUsage: "DIR",
		Description: "Writes a consistent copy of each database (SQLite's VACUUM INTO, a read transaction, so\n" +
			"a running serve goes on serving and writing), the relay archive's log (relay.db-log, the\n" +
			"payloads relay.db indexes) and the two secrets into DIR, which must not exist yet. Each\n" +
			"database is copied as of one moment; the two are copied one after the other.\n" +
			"To restore: stop serve, move the data folder aside, put DIR in its place, start serve.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "data", Value: defaultDataDir, Usage: "the data folder of the serve to back up"},
		},
		Action: func(c *ucli.Context) error {
			args := c.Args().Slice()
			if len(args) != 1 {
				return badUsage("want the folder to write the backup to", "tally serve backup [--data DIR] TARGET")
			}
			copied, err := backup(c.Context, c.String("data"), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "backed up %s to %s (%s)\n", c.String("data"), args[0], strings.Join(copied, ", "))
			return nil
		},
	}
}

// backup copies the data folder's databases and secrets into target,
// which it creates (mode 0700; the files are 0600). A database is copied
// with VACUUM INTO inside one read transaction, so the copy is the state
// of one moment, even while serve writes. A failed backup removes what it
// wrote.
func backup(ctx context.Context, data, target string) (copied []string, err error) {
	var found []string
	for _, f := range backupDBs {
		if _, err := os.Stat(filepath.Join(data, f)); err == nil {
			found = append(found, f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if len(found) == 0 {
		return nil, notFound("no database in "+data, "pass the data folder of the serve: --data DIR")
	}
	defer datadir.RestrictUmask()()
	if err := os.Mkdir(target, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, &usageError{target + " exists already", "name a new folder: a backup never overwrites one"}
		}
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(target)
		}
	}()
	for _, f := range found {
		src, dst := filepath.Join(data, f), filepath.Join(target, f)
		if f == relayDB {
			// The relay's archive is the database and its log.
			err = relay.BackupArchive(ctx, src, dst)
		} else {
			err = sqlitedb.VacuumInto(ctx, src, dst)
		}
		if err != nil {
			return nil, fmt.Errorf("backup of %s: %w", f, err)
		}
		copied = append(copied, f)
		if _, err := os.Stat(relay.LogDir(dst)); err == nil {
			copied = append(copied, filepath.Base(relay.LogDir(dst)))
		}
	}
	for _, f := range backupSecrets {
		b, err := os.ReadFile(filepath.Join(data, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := writeFileSync(filepath.Join(target, f), b); err != nil {
			return nil, err
		}
		copied = append(copied, f)
	}
	return copied, nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
