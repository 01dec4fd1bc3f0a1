package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/skytale-oss/skytale/internal/admin"
	"github.com/skytale-oss/skytale/internal/datadir"
)

func serveCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "serve",
		Usage: "run the directory and the relay on SQLite (self-hosting)",
		Description: "Secrets are generated into the data folder on first start (mode 0600) and reused.\n" +
			"Signup is open when both planes listen on loopback. Put a TLS proxy in front for\n" +
			"anything beyond one machine. Garbage is collected as with GOGC=400 under a soft\n" +
			"GOMEMLIMIT of 512MiB unless those variables are set.",
		Flags:       serveFlags(),
		Subcommands: []*ucli.Command{backupCommand(), signupTokenCommand(), accountCommand(), accountsCommand(), clusterCommand(), checkConfigCommand()},
		Action: func(c *ucli.Context) error {
			if c.NArg() == 1 && c.Args().First() == "help" {
				return ucli.ShowSubcommandHelp(c)
			}
			if c.NArg() != 0 {
				return badUsage(fmt.Sprintf("unknown command %q", "tally serve "+c.Args().First()), "see `tally serve --help`")
			}
			if err := applyServeConfig(c, c.Command, ""); err != nil {
				return err
			}
			opts, err := serveOptionsFrom(c)
			if err != nil {
				return err
			}
			tuneGC()
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
	// defaultMaxConnsPerNet is four addresses' worth: a /24 or /64 is
	// one site or one host, never a quarter of the listener.
	defaultMaxConnsPerNet = 1024
	// defaultMaxIdlePerIP: a browser or client keeps a few keep-alive
	// connections per origin; an office NAT a few dozen.
	defaultMaxIdlePerIP = 64
	// fdReserve is kept out of the connection caps for the databases,
	// logs and outgoing requests.
	fdReserve = 128
)

type serveOptions struct {
	Data, APIAddr, RelayAddr, Only, DirectoryURL string
	// ArchiveCap and ArchiveTTL are relay.Config's (zero: its defaults).
	ArchiveCap int
	ArchiveTTL time.Duration
	// LogFormat is "text" (the default) or "json"; LogLevel the least
	// level logged.
	LogFormat string
	LogLevel  slog.Level
	// LimitsOff turns the directory's rate limits off (Limits.Off), for
	// test rigs on loopback only.
	LimitsOff  bool
	OpenSignup *bool
	Quiet      bool
	// LogClients names client addresses, account ids and channels in
	// both planes' logs (relay.Config and directory.Config LogClients).
	LogClients bool
	// InsecureHTTP allows plain HTTP on a non-loopback address.
	InsecureHTTP bool
	// Zero values take the defaults above; MaxConnsPerIP < 0 means no
	// per-address cap.
	ReadTimeout, WriteTimeout, IdleTimeout, ReadHeaderTimeout time.Duration
	MaxConns, MaxConnsPerIP                                   int

	// DirectoryDB, if set, is the directory's database: a postgres://
	// URL or a SQLite file (default <Data>/directory.db). RelayNATS, if
	// set, keeps the relay's archive in NATS JetStream (NATSStream and
	// NATSReplicas as jsarchive.Config's Stream and Replicas).
	DirectoryDB, RelayNATS, NATSStream string
	NATSReplicas                       int
	// MetricsAddr, if set, serves the planes' Prometheus metrics at
	// /metrics on its own listener.
	MetricsAddr string
	// RelayURL is, with Only "directory", the relays whose commit fence
	// the directory reads (default http://<RelayAddr>), separated by
	// commas.
	RelayURL string
	// ReadyFeedLag is relay.Config's (zero: its default).
	ReadyFeedLag time.Duration

	// listening, if set, is called with each plane's name and URL once
	// it accepts connections.
	listening func(plane, url string)

	admissionOptions
	budgetOptions
	limitOptions
	secretSources
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
	if o.MaxConnsPerNet == 0 {
		o.MaxConnsPerNet = defaultMaxConnsPerNet
	}
	if o.MaxIdlePerIP == 0 {
		o.MaxIdlePerIP = defaultMaxIdlePerIP
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
	started := time.Now()
	planes, err := o.servedPlanes()
	if err != nil {
		return err
	}
	// The admin page shows the last error records.
	errRing := admin.NewErrorRing(adminErrors, o.LogClients)
	log := o.logger(logw, errRing)
	if o.LimitsOff {
		log.Warn("the directory's rate limits are off (--limits off): a test rig, never a server that faces the network")
	}
	if err := o.checkPlainHTTP(planes, log); err != nil {
		return err
	}
	// A node that joins a cluster takes the cluster's secrets; checked
	// before anything is created.
	joining := o.Only == "relay" || o.RelayNATS != "" || isPostgresURL(o.DirectoryDB)
	if err := o.secretSources.check(o.Data, joining); err != nil {
		return err
	}

	defer datadir.RestrictUmask()()
	release, err := o.takeDataFolder(ctx, planes, log)
	if err != nil {
		return err
	}
	// Released after the planes are closed (deferred first, run last).
	defer release()
	jwtSecret, internal, err := o.secretSources.load(o.Data)
	if err != nil {
		return err
	}
	reqLog := log
	if o.Quiet {
		reqLog = slog.New(quietHandler{log.Handler()})
	}
	caps := o.connCaps(planes, openFileLimit())
	for _, p := range planes {
		if caps[p.name] < o.MaxConns {
			log.Warn("the open-file limit holds a plane below --max-conns: raise it (ulimit -n, or LimitNOFILE= in a systemd unit) for more connections",
				"plane", p.name, "open_files", openFileLimit(), "max_conns", caps[p.name], "wanted", o.MaxConns)
		}
	}
	dcfg, rcfg := o.planeConfigs(jwtSecret, internal, reqLog, caps["relay"])
	reg := o.newRegistry()
	b := newPlaneBuilder(&o, planes, dcfg, rcfg, jwtSecret, internal, reg)
	defer b.close(log)

	gparent, cancelAll := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(gparent)
	// Whatever returns, the goroutines end before the planes close.
	defer func() { cancelAll(); g.Wait() }()
	if err := b.start(gctx, g, log); err != nil {
		return err
	}
	planes = o.sidePlanes(planes, reg, internal, errRing, started)
	if err := o.listen(gctx, g, planes, caps, log); err != nil {
		return err
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
