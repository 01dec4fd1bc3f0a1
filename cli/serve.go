package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/relay"
)

func serveCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "serve",
		Usage: "run the directory and the relay on SQLite (self-hosting)",
		Description: "Secrets are generated into the data folder on first start (mode 0600) and reused.\n" +
			"Signup is open when both planes listen on loopback. Put a TLS proxy in front for\n" +
			"anything beyond one machine.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "data", Value: "./tally-data", Usage: "folder for the databases and secrets"},
			&ucli.StringFlag{Name: "api-addr", Value: "127.0.0.1:3100", Usage: "directory listen address"},
			&ucli.StringFlag{Name: "relay-addr", Value: "127.0.0.1:8443", Usage: "relay listen address"},
			&ucli.StringFlag{Name: "only", Usage: "run one plane: directory or relay"},
			&ucli.StringFlag{Name: "directory-url", Usage: "with --only relay: the directory to learn revocations from (default http://<api-addr>)"},
			&ucli.BoolFlag{Name: "open-signup", Usage: "allow anyone to create accounts (default: on when listening on loopback only)"},
			&ucli.BoolFlag{Name: "quiet", Usage: "do not log requests"},
		},
		Action: func(c *ucli.Context) error {
			opts := serveOptions{
				Data:         c.String("data"),
				APIAddr:      c.String("api-addr"),
				RelayAddr:    c.String("relay-addr"),
				Only:         c.String("only"),
				DirectoryURL: c.String("directory-url"),
				Quiet:        c.Bool("quiet"),
			}
			if c.IsSet("open-signup") {
				v := c.Bool("open-signup")
				opts.OpenSignup = &v
			}
			return serve(c.Context, opts, c.App.ErrWriter)
		},
	}
}

type serveOptions struct {
	Data, APIAddr, RelayAddr, Only, DirectoryURL string
	OpenSignup                                   *bool
	Quiet                                        bool
}

// serve runs until ctx is cancelled, then shuts down: listeners stop,
// in-flight requests finish, the relay flushes its archive.
func serve(ctx context.Context, o serveOptions, logw interface{ Write([]byte) (int, error) }) error {
	runDir, runRelay := true, true
	switch o.Only {
	case "":
	case "directory":
		runRelay = false
	case "relay":
		runDir = false
	default:
		return &usageError{fmt.Sprintf("unknown plane %q", o.Only), "use --only directory or --only relay"}
	}
	if err := os.MkdirAll(o.Data, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	jwtSecret, err := loadSecret(filepath.Join(o.Data, "jwt_secret"))
	if err != nil {
		return err
	}
	internal, err := loadSecret(filepath.Join(o.Data, "internal_secret"))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logw, nil))
	reqLog := log
	if o.Quiet {
		reqLog = nil
	}
	open := isLoopback(o.APIAddr) && isLoopback(o.RelayAddr)
	if o.OpenSignup != nil {
		open = *o.OpenSignup
	}

	var handlers []plane
	var closers []func(context.Context) error
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range closers {
			if err := c(ctx); err != nil {
				log.Error("close", "err", err)
			}
		}
	}()
	dcfg := skytale.DirectoryConfig{
		DBPath: filepath.Join(o.Data, "directory.db"), JWTSecret: jwtSecret,
		InternalSecret: internal, OpenSignup: open, Logger: planeLogger(reqLog, "directory"),
	}
	rcfg := skytale.RelayConfig{
		DBPath: filepath.Join(o.Data, "relay.db"), JWTSecret: jwtSecret,
		Logger: planeLogger(reqLog, "relay"),
	}
	switch {
	case runDir && runRelay:
		st, err := skytale.NewStack(skytale.StackConfig{JWTSecret: jwtSecret, InternalSecret: internal, Directory: dcfg, Relay: rcfg})
		if err != nil {
			return err
		}
		closers = append(closers, st.Close)
		handlers = append(handlers, plane{"directory", o.APIAddr, st.Directory}, plane{"relay", o.RelayAddr, st.Relay})
	case runDir:
		d, err := skytale.NewDirectory(dcfg)
		if err != nil {
			return err
		}
		closers = append(closers, d.Close)
		handlers = append(handlers, plane{"directory", o.APIAddr, d})
	default:
		dirURL := o.DirectoryURL
		if dirURL == "" {
			dirURL = "http://" + o.APIAddr
		}
		rcfg.Revocations = relay.NewHTTPRevocations(dirURL, string(internal), nil)
		r, err := skytale.NewRelay(rcfg)
		if err != nil {
			return err
		}
		closers = append(closers, r.Close)
		handlers = append(handlers, plane{"relay", o.RelayAddr, r})
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, p := range handlers {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		srv := &http.Server{Handler: p.h, ReadHeaderTimeout: 10 * time.Second}
		attrs := []any{"url", "http://" + ln.Addr().String()}
		if p.name == "directory" {
			attrs = append(attrs, "open_signup", open)
		}
		log.Info(p.name+" listening", attrs...)
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			// Shutdown does not wait for hijacked (WebSocket) connections;
			// the relay's Close, run after, ends those.
			return srv.Shutdown(sctx)
		})
	}
	err = g.Wait()
	log.Info("shutting down")
	return err
}

type plane struct {
	name, addr string
	h          http.Handler
}

func planeLogger(l *slog.Logger, name string) *slog.Logger {
	if l == nil {
		return nil
	}
	return l.With("plane", name)
}

// loadSecret reads a secret from path, creating it (mode 0600) the first
// time as 32 random bytes in hex. The secret is the hex text itself, so the
// operator can paste it into an Authorization header.
func loadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if raw, err := hex.DecodeString(s); err != nil || len(raw) < 32 {
			return nil, fmt.Errorf("%s is not a 32-byte hex secret; remove it to generate a new one", path)
		}
		return []byte(s), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	s := []byte(hex.EncodeToString(raw))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(append(s, '\n')); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return s, f.Close()
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
