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
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	ucli "github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/relay"
)

func serveCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "serve",
		Usage: "run the directory and the relay on SQLite (self-hosting)",
		Description: "Secrets are generated into the data folder on first start (mode 0600) and reused.\n" +
			"Signup is open when both planes listen on loopback. Put a TLS proxy in front for\n" +
			"anything beyond one machine. Garbage is collected as with GOGC=400 under a soft\n" +
			"GOMEMLIMIT of 512MiB unless those variables are set.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "data", Value: defaultDataDir, Usage: "folder for the databases and secrets"},
			&ucli.StringFlag{Name: "api-addr", Value: defaultAPIAddr, Usage: "directory listen address"},
			&ucli.StringFlag{Name: "relay-addr", Value: defaultRelayAddr, Usage: "relay listen address"},
			&ucli.StringFlag{Name: "only", Usage: "run one plane: directory or relay"},
			&ucli.StringFlag{Name: "directory-url", Usage: "with --only relay: the directory to learn revocations and channel members from", DefaultText: "http://<api-addr>"},
			&ucli.BoolFlag{Name: "open-signup", Usage: "allow anyone to create accounts; --open-signup=false closes it", DefaultText: "on when both planes listen on loopback"},
			&ucli.BoolFlag{Name: "quiet", Usage: "do not log requests"},
			&ucli.BoolFlag{Name: "insecure-http", Usage: "allow plain HTTP on a non-loopback address (put a TLS proxy in front instead)"},
			&ucli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics of both planes at /metrics on this address, apart from the public listeners (off by default)"},
			&ucli.StringFlag{Name: "directory-db", Usage: "keep the directory in PostgreSQL (postgres://…) or in this SQLite file", DefaultText: "<data>/directory.db"},
			&ucli.StringFlag{Name: "relay-nats", Usage: "keep the relay's archive in NATS JetStream at these URLs (comma-separated), so several relays share it"},
			&ucli.StringFlag{Name: "relay-nats-stream", Usage: "with --relay-nats: the stream name and subject prefix", DefaultText: "SKYTALE"},
			&ucli.IntFlag{Name: "relay-nats-replicas", Usage: "with --relay-nats: replicas of a stream the relay creates, 1 to 5; a relay whose count differs from an existing stream's refuses to start (change it with tally serve cluster update-stream)", DefaultText: "the stream's, or 1 when creating it"},
			&ucli.DurationFlag{Name: "read-timeout", Value: defaultReadTimeout, Usage: "longest time to read a whole request, body included"},
			&ucli.DurationFlag{Name: "write-timeout", Value: defaultWriteTimeout, Usage: "longest time to write a response (not for WebSockets)"},
			&ucli.DurationFlag{Name: "idle-timeout", Value: defaultIdleTimeout, Usage: "how long an idle keep-alive connection stays open"},
			&ucli.IntFlag{Name: "max-conns", Value: defaultMaxConns, Usage: "open connections per plane, WebSockets included (lowered to fit the open-file limit); more wait"},
			&ucli.IntFlag{Name: "max-conns-per-ip", Value: defaultMaxConnsPerIP, Usage: "open connections per plane from one non-loopback address (IPv6: per /64); more are closed; 0 for no cap"},
		},
		Subcommands: []*ucli.Command{backupCommand(), clusterCommand()},
		Action: func(c *ucli.Context) error {
			if c.NArg() == 1 && c.Args().First() == "help" {
				return ucli.ShowSubcommandHelp(c)
			}
			if c.NArg() != 0 {
				return &usageError{fmt.Sprintf("unknown command %q", "tally serve "+c.Args().First()), "see `tally serve --help`"}
			}
			tuneGC()
			opts := serveOptions{
				Data:          c.String("data"),
				APIAddr:       c.String("api-addr"),
				RelayAddr:     c.String("relay-addr"),
				Only:          c.String("only"),
				DirectoryURL:  c.String("directory-url"),
				Quiet:         c.Bool("quiet"),
				InsecureHTTP:  c.Bool("insecure-http"),
				ReadTimeout:   c.Duration("read-timeout"),
				WriteTimeout:  c.Duration("write-timeout"),
				IdleTimeout:   c.Duration("idle-timeout"),
				MaxConns:      c.Int("max-conns"),
				MaxConnsPerIP: c.Int("max-conns-per-ip"),
				MetricsAddr:   c.String("metrics-addr"),
				DirectoryDB:   c.String("directory-db"),
				RelayNATS:     c.String("relay-nats"),
				NATSStream:    c.String("relay-nats-stream"),
				NATSReplicas:  c.Int("relay-nats-replicas"),
			}
			if c.IsSet("open-signup") {
				v := c.Bool("open-signup")
				opts.OpenSignup = &v
			}
			return serve(c.Context, opts, c.App.ErrWriter)
		},
	}
}

// Defaults of the HTTP servers of both planes.
const (
	defaultDataDir = "./tally-data"

	defaultReadTimeout       = 30 * time.Second
	defaultWriteTimeout      = 60 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	defaultReadHeaderTimeout = 10 * time.Second
	defaultMaxConns          = 4096
	defaultMaxConnsPerIP     = 256
	// fdReserve is kept out of the connection caps for the databases,
	// logs and outgoing requests.
	fdReserve = 128
)

type serveOptions struct {
	Data, APIAddr, RelayAddr, Only, DirectoryURL string
	OpenSignup                                   *bool
	Quiet                                        bool
	// InsecureHTTP allows plain HTTP on a non-loopback address.
	InsecureHTTP bool
	// Zero values take the defaults above; MaxConnsPerIP < 0 means no
	// per-address cap.
	ReadTimeout, WriteTimeout, IdleTimeout, ReadHeaderTimeout time.Duration
	MaxConns, MaxConnsPerIP                                   int

	// DirectoryDB, if set, is the directory's database: a postgres://
	// URL or a SQLite file (default <Data>/directory.db). RelayNATS, if
	// set, keeps the relay's archive in NATS JetStream (NATSStream and
	// NATSReplicas as relay.Config has them).
	DirectoryDB, RelayNATS, NATSStream string
	NATSReplicas                       int
	// MetricsAddr, if set, serves the planes' Prometheus metrics at
	// /metrics on its own listener.
	MetricsAddr string

	// listening, if set, is called with each plane's name and URL once
	// it accepts connections.
	listening func(plane, url string)
}

func (o *serveOptions) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ReadTimeout, defaultReadTimeout)
	def(&o.WriteTimeout, defaultWriteTimeout)
	def(&o.IdleTimeout, defaultIdleTimeout)
	def(&o.ReadHeaderTimeout, min(defaultReadHeaderTimeout, o.ReadTimeout))
	if o.MaxConns <= 0 {
		o.MaxConns = defaultMaxConns
	}
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = defaultMaxConnsPerIP
	}
}

// serve runs until ctx is cancelled, then shuts down: listeners stop,
// in-flight requests finish, the relay flushes its archive.
//
// Before it serves anything it takes the data folder's lock of each plane
// it runs (a second serve of the same plane on the folder refuses to
// start), makes the folder 0700 and every file in it 0600, runs with
// umask 0077, and checks that the databases can be written.
func serve(ctx context.Context, o serveOptions, logw interface{ Write([]byte) (int, error) }) error {
	o.defaults()
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
	log := slog.New(slog.NewTextHandler(logw, nil))
	var planes []plane
	if runDir {
		// A directory on another database (--directory-db) has no file
		// in the data folder to check.
		db := "directory.db"
		if o.DirectoryDB != "" {
			db = ""
		}
		planes = append(planes, plane{name: "directory", addr: o.APIAddr, db: db})
	}
	if runRelay {
		planes = append(planes, plane{name: "relay", addr: o.RelayAddr, db: relayDB})
	}
	for _, p := range planes {
		if isLoopback(p.addr) {
			continue
		}
		if !o.InsecureHTTP {
			return &usageError{fmt.Sprintf("the %s would serve plain HTTP on %s, which is not a loopback address", p.name, p.addr),
				"listen on 127.0.0.1 behind a TLS proxy, or pass --insecure-http if something else encrypts the traffic"}
		}
		log.Warn(p.name+" serves plain HTTP on a non-loopback address: tokens and API keys cross the network in the clear unless a TLS proxy or tunnel carries them", "addr", p.addr)
	}

	defer datadir.RestrictUmask()()
	if err := datadir.Prepare(o.Data); err != nil {
		return err
	}
	for _, p := range planes {
		lockPath := filepath.Join(o.Data, p.name+".lock")
		l, err := datadir.Lock(lockPath)
		if errors.Is(err, datadir.ErrLocked) {
			return fmt.Errorf("data folder %s is in use: another tally serve runs its %s there (it holds %s); stop it or choose another --data", o.Data, p.name, lockPath)
		}
		if err != nil {
			return err
		}
		// Released after the planes are closed (deferred first, run last).
		defer l.Unlock()
	}
	// Said at once, once the data folder is locked and before the databases open, so whoever started it
	// knows it runs and where to look.
	var where []any
	if runDir {
		where = append(where, "directory", "http://"+o.APIAddr)
	}
	if runRelay {
		where = append(where, "relay", "http://"+o.RelayAddr)
	}
	log.Info("tally serve starting", append(where, "data", o.Data)...)
	if !datadir.Supported {
		log.Warn("this system cannot lock the data folder: make sure no other tally serve uses it", "data", o.Data)
	}
	if err := datadir.Secure(o.Data); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	for _, p := range planes {
		if p.db == "" {
			continue
		}
		if err := datadir.CheckWritable(o.Data, p.db, p.db+"-wal", p.db+"-shm"); err != nil {
			return fmt.Errorf("%w: fix the owner or mode, or choose another --data", err)
		}
		if err := datadir.CheckDB(ctx, filepath.Join(o.Data, p.db)); err != nil {
			return fmt.Errorf("%s database: %w", p.name, err)
		}
	}
	jwtSecret, err := loadSecret(filepath.Join(o.Data, "jwt_secret"))
	if err != nil {
		return err
	}
	internal, err := loadSecret(filepath.Join(o.Data, "internal_secret"))
	if err != nil {
		return err
	}
	reqLog := log
	if o.Quiet {
		reqLog = nil
	}
	open := isLoopback(o.APIAddr) && isLoopback(o.RelayAddr)
	if o.OpenSignup != nil {
		open = *o.OpenSignup
	}

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
	if o.DirectoryDB != "" {
		dcfg.DBPath, dcfg.Database = "", o.DirectoryDB
	}

	rcfg := skytale.RelayConfig{
		DBPath: filepath.Join(o.Data, relayDB), JWTSecret: jwtSecret,
		Logger:  planeLogger(reqLog, "relay"),
		NATSURL: o.RelayNATS, NATSStream: o.NATSStream, NATSReplicas: o.NATSReplicas,
	}
	var reg *prometheus.Registry
	if o.MetricsAddr != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		dcfg.Metrics, rcfg.Metrics = reg, reg
	}
	switch {
	case runDir && runRelay:
		st, err := skytale.NewStack(skytale.StackConfig{JWTSecret: jwtSecret, InternalSecret: internal, Directory: dcfg, Relay: rcfg})
		if err != nil {
			return err
		}
		closers = append(closers, st.Close)
		planes[0].h, planes[1].h = st.Directory, st.Relay
	case runDir:
		d, err := skytale.NewDirectory(dcfg)
		if err != nil {
			return err
		}
		closers = append(closers, d.Close)
		planes[0].h = d
	default:
		dirURL := o.DirectoryURL
		if dirURL == "" {
			dirURL = "http://" + o.APIAddr
		}
		// A relay apart from its directory learns revocations and channel
		// members by polling the directory's internal feeds.
		rcfg.Revocations = relay.NewHTTPRevocations(dirURL, string(internal), nil)
		rcfg.Members = relay.NewHTTPMembers(dirURL, string(internal), nil)
		r, err := skytale.NewRelay(rcfg)
		if err != nil {
			return err
		}
		closers = append(closers, r.Close)
		planes[0].h = r
	}
	if reg != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		planes = append(planes, plane{name: "metrics", addr: o.MetricsAddr, h: mux})
	}
	// Every open connection is a file descriptor: the caps of all planes
	// together stay below the process's limit.
	maxConns := o.MaxConns
	if n := openFileLimit(); n > 0 {
		maxConns = max(1, min(maxConns, (n-fdReserve)/len(planes)))
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, p := range planes {
		tl, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		ln := httpx.NewLimitListener(tl, httpx.LimitOptions{
			Max: maxConns, MaxPerAddr: o.MaxConnsPerIP,
			// A TLS proxy on loopback carries every client.
			ExemptAddr: netip.Addr.IsLoopback,
		})
		// The deadlines hold until a WebSocket takes the connection over:
		// net/http clears them when the relay hijacks it, and the relay
		// sets its own per write.
		srv := &http.Server{
			Handler:           p.h,
			ReadHeaderTimeout: o.ReadHeaderTimeout,
			ReadTimeout:       o.ReadTimeout,
			WriteTimeout:      o.WriteTimeout,
			IdleTimeout:       o.IdleTimeout,
			MaxHeaderBytes:    64 << 10,
		}
		url := "http://" + tl.Addr().String()
		attrs := []any{"url", url}
		if p.name == "directory" {
			attrs = append(attrs, "open_signup", open)
		}
		attrs = append(attrs, "max_conns", maxConns)
		log.Info(p.name+" listening", attrs...)
		if o.listening != nil {
			o.listening(p.name, url)
		}
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
	db         string // its database file in the data folder
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
// operator can paste it into an Authorization header. The new file appears
// whole or not at all (written aside, then linked into place), so two
// planes starting at once on one folder agree on the secret.
func loadSecret(path string) ([]byte, error) {
	for {
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
		created, err := createSecret(path)
		if err != nil || created != nil {
			return created, err
		}
		// Another process created it first: read theirs.
	}
}

// createSecret writes a new secret to path, or returns nil, nil if path
// appeared meanwhile.
func createSecret(path string) ([]byte, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	s := []byte(hex.EncodeToString(raw))
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(append(s, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, nil
		}
		return nil, err
	}
	return s, nil
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

// tuneGC collects garbage less often than Go's default, unless GOGC or
// GOMEMLIMIT says otherwise. The relay's live heap is small and every
// message leaves garbage, so at the default (a collection each time the
// heap doubles) it collected about every 130 ms under load, and the
// collections showed in the delivery latency's tail: in an execution
// trace GC was 45 % of the scheduler delay, and GOGC=800 cut the p99 by
// 22 %. A soft limit of 512 MiB brings collections back to the default
// pace before the extra garbage matters on a small machine.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(512 << 20)
	}
}
