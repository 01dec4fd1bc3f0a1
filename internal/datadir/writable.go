package datadir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// CheckWritable reports an error unless this process can create files in
// dir and open for writing every one of names in it that exists. Run it
// before opening the databases: SQLite opens a file it cannot write
// read-only without a word, and the first write then fails.
func CheckWritable(dir string, names ...string) error {
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data folder %s is not writable: %w", dir, unwrapPath(err))
	}
	f.Close()
	os.Remove(f.Name())
	for _, n := range names {
		p := filepath.Join(dir, n)
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s is not writable: %w", p, unwrapPath(err))
		}
		f.Close()
	}
	return nil
}

// CheckDB opens the SQLite database at path and writes to it in a
// transaction it rolls back, which fails if the database, its folder or
// its -wal and -shm files cannot be written.
func CheckDB(ctx context.Context, path string) error {
	db, err := sqlitedb.Open(path)
	if err != nil {
		return fmt.Errorf("%s cannot be opened: %w", path, err)
	}
	defer db.Close()
	// sqlitedb opens with _txlock=immediate: BeginTx is BEGIN IMMEDIATE,
	// which takes the write lock at once.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", path, err)
	}
	defer tx.Rollback()
	// SQLite opens a file it may not write read-only and still begins the
	// transaction: only a write tells. Writing the schema version back
	// unchanged, in a transaction rolled back, changes nothing.
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("%s cannot be read: %w", path, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return fmt.Errorf("%s is not writable: %w", path, err)
	}
	return nil
}

// unwrapPath drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
