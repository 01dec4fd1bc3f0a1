package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/admin"
	"github.com/skytale-oss/skytale/internal/datadir"
)

// The operator's commands: they run beside a tally serve, read the
// internal secret from its data folder, and call the directory's
// operator endpoints over HTTP (the databases are the running serve's).

// operatorFlags are the flags every operator command takes.
func operatorFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "data", Value: defaultDataDir, Usage: "the data folder of the serve, which holds its internal secret"},
		&ucli.StringFlag{Name: "api-url", Value: "http://" + defaultAPIAddr, Usage: "the directory of that serve (when nothing answers there, the command opens the data folder's directory itself)"},
		&ucli.StringFlag{Name: "directory-db", Usage: "the directory's database, as tally serve --directory-db names it", DefaultText: "<data>/directory.db"},
	}
}

// operator is one operator command's context.
type operator struct {
	c      *ucli.Context
	e      *env
	api    string
	secret string
	data   string

	// local is set when the data folder's directory runs in this
	// process, on a loopback listener api then names, because no tally
	// serve answered at api (see do).
	local      bool
	localClose func()
}

func operatorAction(f func(*operator, []string) error) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		args := c.Args().Slice()
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		o := &operator{c: c, e: e, api: strings.TrimRight(c.String("api-url"), "/"), data: c.String("data")}
		b, err := os.ReadFile(filepath.Join(o.data, "internal_secret"))
		switch {
		case err == nil:
			o.secret = strings.TrimSpace(string(b))
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
		defer o.close()
		return f(o, args)
	}
}

// close stops the local directory, if one was started.
func (o *operator) close() {
	if o.localClose != nil {
		o.localClose()
	}
}

// openLocal runs the directory of the data folder in this process: for a
// data folder whose tally serve is not running (or was never started,
// whose secrets it then makes as serve would). It holds the directory's
// lock meanwhile, so a serve starting on the folder waits its turn.
func (o *operator) openLocal() error {
	if err := datadir.Prepare(o.data); err != nil {
		return err
	}
	lock, err := datadir.Lock(filepath.Join(o.data, "directory.lock"))
	if err != nil {
		return fmt.Errorf("no tally serve answers at %s, and another holds %s (pass the --api-url it listens on): %w", o.api, o.data, err)
	}
	jwtSecret, internal, err := secretSources{}.load(o.data)
	if err != nil {
		lock.Unlock()
		return err
	}
	cfg := skytale.DirectoryConfig{DBPath: filepath.Join(o.data, "directory.db"), JWTSecret: jwtSecret, InternalSecret: internal,
		Logger: slog.New(slog.DiscardHandler)}
	if db := o.c.String("directory-db"); db != "" {
		cfg.DBPath, cfg.Database = "", db
	}
	if isPostgresURL(cfg.Database) {
		cfg.Backend = pgstore.Backend{}
	}
	d, err := skytale.NewDirectory(o.c.Context, cfg)
	if err != nil {
		lock.Unlock()
		return err
	}
	if err := datadir.Secure(o.data); err != nil {
		d.Close(context.Background())
		lock.Unlock()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.Close(context.Background())
		lock.Unlock()
		return err
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	o.local, o.secret, o.api = true, string(internal), "http://"+ln.Addr().String()
	o.localClose = func() {
		srv.Close()
		d.Close(context.Background())
		lock.Unlock()
	}
	return nil
}

// call sends a JSON request with the internal secret and decodes the
// answer into out (unless nil); an error answer becomes its message.
func (o *operator) call(method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(o.c.Context, 30*time.Second)
	defer cancel()
	do := func(req *http.Request) (*http.Response, error) {
		resp, err := o.do(req)
		if err != nil {
			return nil, fmt.Errorf("the directory at %s: %w", o.api, err)
		}
		return resp, nil
	}
	err := admin.Call(ctx, do, o.api, o.secret, method, path, in, out)
	if e, ok := err.(*admin.APIError); ok && e.Code != "" {
		return fmt.Errorf("the directory refused: %s (%s)", safe(e.Message), safe(e.Code))
	}
	return err
}

// do sends req to the running tally serve or, when nothing listens at
// its address, to the data folder's directory run here.
func (o *operator) do(req *http.Request) (*http.Response, error) {
	if !o.local && o.secret != "" {
		resp, err := http.DefaultClient.Do(req)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return resp, err
		}
	}
	if !o.local {
		if err := o.openLocal(); err != nil {
			return nil, err
		}
	}
	local, err := url.Parse(o.api)
	if err != nil {
		return nil, err
	}
	req.URL.Scheme, req.URL.Host, req.Host = local.Scheme, local.Host, local.Host
	req.Header.Set("Authorization", "Bearer "+o.secret)
	if req.GetBody != nil {
		if req.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return http.DefaultClient.Do(req)
}

// safe is text a server sent, fit for a terminal: control characters and
// other non-printing runes are escaped (the --json form stays exact).
func safe(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}
