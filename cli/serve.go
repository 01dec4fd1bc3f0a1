package cli

import (
	"cmp"
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
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/directory/dirmetrics"
	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/clientaddr"
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
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "data", Value: defaultDataDir, Usage: "folder for the databases and secrets"},
			&ucli.StringFlag{Name: "api-addr", Value: defaultAPIAddr, Usage: "directory listen address"},
			&ucli.StringFlag{Name: "relay-addr", Value: defaultRelayAddr, Usage: "relay listen address"},
			&ucli.StringFlag{Name: "only", Usage: "run one plane: directory or relay"},
			configFlag(),
			&ucli.IntFlag{Name: "archive-cap", Usage: "application entries the relay keeps per channel (cover traffic counts too: the default holds a day of real messages under a busy room's cover)", Value: relay.DefaultArchiveCap},
			&ucli.DurationFlag{Name: "archive-ttl", Usage: "how long the relay keeps an entry", Value: relay.DefaultArchiveTTL},
			&ucli.StringFlag{Name: "log-format", Usage: "text or json", Value: "text"},
			&ucli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", Value: "info"},
			&ucli.StringFlag{Name: "limits", Usage: "on, or off for a test rig: no rate limits at the directory (refused unless both planes listen on loopback)", Value: "on"},
			&ucli.StringFlag{Name: "directory-url", Usage: "with --only relay: the directories (comma-separated, of one database) to learn revocations and channel members from; the relay follows whichever answers", DefaultText: "http://<api-addr>"},
			&ucli.StringFlag{Name: "relay-url", Usage: "with --only directory: the relays (comma-separated, of one cluster) whose commit fence GroupInfo epochs are checked against; the directory asks whichever answers", DefaultText: "http://<relay-addr>"},
			&ucli.BoolFlag{Name: "open-signup", Usage: "the older spelling of --signup open (true) or closed (false)", DefaultText: "on when both planes listen on loopback"},
			&ucli.BoolFlag{Name: "quiet", Usage: "do not log a line per request (warnings and errors are still logged)"},
			&ucli.BoolFlag{Name: "log-clients", Usage: "name client addresses, account ids and channels (and raw request paths) in the logs, for debugging; off, the logs name no one"},
			&ucli.BoolFlag{Name: "insecure-http", Usage: "allow plain HTTP on a non-loopback address (put a TLS proxy in front instead)"},
			&ucli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics of both planes at /metrics on this address, apart from the public listeners (off by default)"},
			&ucli.StringFlag{Name: "directory-db", Usage: "keep the directory in PostgreSQL (postgres://…) or in this SQLite file", DefaultText: "<data>/directory.db"},
			&ucli.StringFlag{Name: "relay-nats", Usage: "keep the relay's archive in NATS JetStream at these URLs (comma-separated), so several relays share it"},
			&ucli.StringFlag{Name: "relay-nats-stream", Usage: "with --relay-nats: the stream name and subject prefix", DefaultText: "SKYTALE"},
			&ucli.IntFlag{Name: "relay-nats-replicas", Usage: "with --relay-nats: replicas of a stream the relay creates, 1 to 5; a relay whose count differs from an existing stream's refuses to start (change it with tally serve cluster update-stream)", DefaultText: "the stream's, or 1 when creating it"},
			&ucli.DurationFlag{Name: "read-timeout", Value: defaultReadTimeout, Usage: "longest time to read a whole request, body included"},
			&ucli.DurationFlag{Name: "write-timeout", Value: defaultWriteTimeout, Usage: "longest time to write a response (not for WebSockets)"},
			&ucli.DurationFlag{Name: "idle-timeout", Value: defaultIdleTimeout, Usage: "how long an idle keep-alive connection stays open"},
			&ucli.IntFlag{Name: "max-conns", Value: defaultMaxConns, Usage: "open connections per plane, WebSockets included (lowered to fit the open-file limit); at the cap a quiet one (silent or idle for a second) of the network holding the most is closed for a new one, and with none quiet more wait"},
			&ucli.IntFlag{Name: "max-conns-per-ip", Value: defaultMaxConnsPerIP, Usage: "open connections per plane from one non-loopback address (IPv6: per /64); more are closed; 0 for no cap"},
			// Client addresses, connection admission and health.
			&ucli.StringFlag{Name: "trusted-proxy", Usage: "CIDR[,CIDR]: reverse proxies whose X-Forwarded-For (or, with --proxy-protocol, PROXY v2 header) names the client; without it every client behind a proxy is the proxy's one address"},
			&ucli.BoolFlag{Name: "proxy-protocol", Usage: "with --trusted-proxy: read a PROXY protocol v2 header on every connection from a trusted proxy (required from them)"},
			&ucli.StringFlag{Name: "health-addr", Usage: "serve GET /health (liveness) and GET /ready (readiness of every plane served) on this address of its own, apart from the public listeners and their connection caps, so they answer under a connection flood (off by default)"},
			// Cluster: shared secrets and readiness.
			&ucli.StringFlag{Name: "jwt-secret-file", EnvVars: []string{"SKYTALE_JWT_SECRET_FILE"}, Usage: "read the JWT secret, which every directory and relay of a cluster shares, from this file (or give the secret itself in SKYTALE_JWT_SECRET); a node meant to join a cluster (--only relay, --relay-nats or a postgres:// --directory-db) never generates one", DefaultText: "<data>/jwt_secret, generated on first start of a single node"},
			&ucli.StringFlag{Name: "internal-secret-file", EnvVars: []string{"SKYTALE_INTERNAL_SECRET_FILE"}, Usage: "read the internal secret, which every directory and relay of a cluster shares, from this file (or give the secret itself in SKYTALE_INTERNAL_SECRET); never generated by a node meant to join a cluster", DefaultText: "<data>/internal_secret, generated on first start of a single node"},
			&ucli.DurationFlag{Name: "ready-feed-lag", Value: relay.DefaultReadyFeedLag, Usage: "the relay answers GET /ready 503 once the directory's feeds (revocations, channel members) were last read this long ago"},
			&ucli.IntFlag{Name: "max-conns-per-net", Value: defaultMaxConnsPerNet, Usage: "open connections per plane from one IPv4 /24 or IPv6 /64 (not loopback, not a trusted proxy); more are closed; 0 for no cap"},
			&ucli.IntFlag{Name: "max-idle-per-ip", Value: defaultMaxIdlePerIP, Usage: "idle keep-alive connections per plane from one address (IPv6: per /64); an idle one past it is closed; 0 for no cap"},
			&ucli.IntFlag{Name: "relay-max-conns", Usage: "WebSockets the relay holds, the login reserve included", DefaultText: "--max-conns minus an eighth for HTTP requests"},
			&ucli.IntFlag{Name: "relay-login-reserve", Usage: "WebSockets kept for sockets not yet authenticated; a full reserve closes the one silent longest", DefaultText: "1024, at most a quarter of --relay-max-conns"},
			&ucli.IntFlag{Name: "relay-conns-per-ip", Value: relay.DefaultMaxConnsPerAddr, Usage: "WebSockets per client address, authenticated or not"},
			&ucli.IntFlag{Name: "relay-conns-per-net", Value: relay.DefaultMaxConnsPerNet, Usage: "WebSockets per client IPv4 /24 or IPv6 /64, authenticated or not"},
			&ucli.IntFlag{Name: "relay-logins-per-ip", Value: relay.DefaultMaxUnauthConnsPerAddr, Usage: "WebSockets not yet authenticated per client address"},
			&ucli.IntFlag{Name: "relay-logins-per-net", Value: relay.DefaultMaxUnauthConnsPerNet, Usage: "WebSockets not yet authenticated per client IPv4 /24 or IPv6 /64"},
			&ucli.DurationFlag{Name: "relay-ping-interval", Value: relay.DefaultPingInterval, Usage: "how often the relay pings an authenticated WebSocket"},
			&ucli.DurationFlag{Name: "relay-ping-timeout", Value: relay.DefaultPingTimeout, Usage: "how long a pong may take before the WebSocket is closed"},
			// Directory reads (directory.Limits).
			&ucli.IntFlag{Name: "directory-reads-per-account", Value: directory.DefaultLimits.ReadsPerAccount, Usage: "directory reads of blobs or lists one account may have in flight; more wait a second, then 429; 0 for no bound"},
			&ucli.IntFlag{Name: "directory-read-mib", Value: int(directory.DefaultLimits.ReadBytes >> 20), Usage: "MiB of directory answers in flight on the whole server, each read counted as its 4 MiB page bound; 0 for no bound"},
		}, budgetFlags()...), // signup and storage budgets: serve_budget.go
		Subcommands: []*ucli.Command{backupCommand(), signupTokenCommand(), accountCommand(), accountsCommand(), clusterCommand(), checkConfigCommand()},
		Action: func(c *ucli.Context) error {
			if c.NArg() == 1 && c.Args().First() == "help" {
				return ucli.ShowSubcommandHelp(c)
			}
			if c.NArg() != 0 {
				return &usageError{fmt.Sprintf("unknown command %q", "tally serve "+c.Args().First()), "see `tally serve --help`"}
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

// serveOptionsFrom reads serve's settings from c, refusing the ones that
// cannot be.
func serveOptionsFrom(c *ucli.Context) (serveOptions, error) {
	opts := serveOptions{
		Data:          c.String("data"),
		APIAddr:       c.String("api-addr"),
		RelayAddr:     c.String("relay-addr"),
		Only:          c.String("only"),
		DirectoryURL:  c.String("directory-url"),
		RelayURL:      c.String("relay-url"),
		Quiet:         c.Bool("quiet"),
		LogClients:    c.Bool("log-clients"),
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
		ReadyFeedLag:  c.Duration("ready-feed-lag"),
		secretSources: secretSources{
			JWTFile:      c.String("jwt-secret-file"),
			InternalFile: c.String("internal-secret-file"),
			JWTEnv:       os.Getenv("SKYTALE_JWT_SECRET"),
			InternalEnv:  os.Getenv("SKYTALE_INTERNAL_SECRET"),
		},
	}
	if err := opts.admissionFlags(c); err != nil {
		return opts, err
	}
	if err := opts.budgetFlagsInto(c); err != nil {
		return opts, err
	}
	if err := opts.logFlags(c); err != nil {
		return opts, err
	}
	opts.readFlags(c)
	if c.IsSet("open-signup") {
		v := c.Bool("open-signup")
		opts.OpenSignup = &v
	}
	return opts, nil
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
	// NATSReplicas as relay.Config has them).
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
	secretSources
}

// admissionOptions are the client-address, connection and health
// settings of tally serve.
type admissionOptions struct {
	// TrustedProxies are the reverse proxies whose forwarded client
	// address both planes believe; ProxyProtocol reads a PROXY v2 header
	// from them on the listeners instead of X-Forwarded-For.
	TrustedProxies []netip.Prefix
	ProxyProtocol  bool
	// HealthAddr, if set, serves GET /health on a listener of its own.
	HealthAddr string
	// MaxConnsPerNet and MaxIdlePerIP bound each plane's listener per
	// network and its idle keep-alive connections per address (zero: the
	// defaults; negative: no cap).
	MaxConnsPerNet, MaxIdlePerIP int
	// The relay's admission (relay.Config); zero means its default, and
	// RelayMaxConns 0 the listener's cap minus an eighth.
	RelayMaxConns, RelayLoginReserve    int
	RelayConnsPerIP, RelayConnsPerNet   int
	RelayLoginsPerIP, RelayLoginsPerNet int
	RelayPingInterval, RelayPingTimeout time.Duration
	// DirectoryReadsPerAccount and DirectoryReadBytes bound the directory's
	// reads in flight (directory.Limits; zero: the defaults; negative: no
	// bound).
	DirectoryReadsPerAccount int
	DirectoryReadBytes       int64
}

// logFlags reads the archive, log and limits settings into o.
func (o *serveOptions) logFlags(c *ucli.Context) error {
	o.ArchiveCap, o.ArchiveTTL = c.Int("archive-cap"), c.Duration("archive-ttl")
	if o.ArchiveCap < 1 || o.ArchiveTTL < time.Minute {
		return badUsage("--archive-cap must be at least 1 and --archive-ttl at least 1m", "")
	}
	switch o.LogFormat = c.String("log-format"); o.LogFormat {
	case "text", "json":
	default:
		return badUsage(fmt.Sprintf("unknown --log-format %q", o.LogFormat), "use text or json")
	}
	if err := o.LogLevel.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return badUsage(fmt.Sprintf("unknown --log-level %q", c.String("log-level")), "use debug, info, warn or error")
	}
	switch c.String("limits") {
	case "on":
	case "off":
		if !isLoopback(o.APIAddr) || !isLoopback(o.RelayAddr) {
			return badUsage("--limits off is for test rigs on loopback", "keep the limits on a server that faces the network")
		}
		o.LimitsOff = true
	default:
		return badUsage(fmt.Sprintf("unknown --limits %q", c.String("limits")), "use on or off")
	}
	return nil
}

// readFlags reads the directory's read bounds into o; the flags' 0 is "no
// bound", which directory.Limits spells negative.
func (o *serveOptions) readFlags(c *ucli.Context) {
	o.DirectoryReadsPerAccount, o.DirectoryReadBytes = -1, -1
	if v := c.Int("directory-reads-per-account"); v > 0 {
		o.DirectoryReadsPerAccount = v
	}
	if v := c.Int("directory-read-mib"); v > 0 {
		o.DirectoryReadBytes = int64(v) << 20
	}
}

// admissionFlags reads the admission flags into o.
func (o *serveOptions) admissionFlags(c *ucli.Context) error {
	if v := c.String("trusted-proxy"); v != "" {
		p, err := clientaddr.ParsePrefixes(v)
		if err != nil {
			return &usageError{err.Error(), "--trusted-proxy takes CIDR prefixes or addresses, separated by commas"}
		}
		o.TrustedProxies = p
	}
	o.ProxyProtocol = c.Bool("proxy-protocol")
	if o.ProxyProtocol && len(o.TrustedProxies) == 0 {
		return badUsage("--proxy-protocol needs --trusted-proxy", "name the proxies that send the PROXY header")
	}
	o.HealthAddr = c.String("health-addr")
	// The listener caps' 0 is "no cap", which serveOptions spells -1.
	noCap := func(name string) int {
		if v := c.Int(name); v != 0 {
			return v
		}
		return -1
	}
	o.MaxConnsPerNet = noCap("max-conns-per-net")
	o.MaxIdlePerIP = noCap("max-idle-per-ip")
	o.MaxConnsPerIP = noCap("max-conns-per-ip")
	o.RelayMaxConns = c.Int("relay-max-conns")
	o.RelayLoginReserve = c.Int("relay-login-reserve")
	o.RelayConnsPerIP = c.Int("relay-conns-per-ip")
	o.RelayConnsPerNet = c.Int("relay-conns-per-net")
	o.RelayLoginsPerIP = c.Int("relay-logins-per-ip")
	o.RelayLoginsPerNet = c.Int("relay-logins-per-net")
	o.RelayPingInterval = c.Duration("relay-ping-interval")
	o.RelayPingTimeout = c.Duration("relay-ping-timeout")
	return nil
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
	hopts := &slog.HandlerOptions{Level: o.LogLevel}
	var h slog.Handler = slog.NewTextHandler(logw, hopts)
	if o.LogFormat == "json" {
		h = slog.NewJSONHandler(logw, hopts)
	}
	log := slog.New(h)
	if o.LimitsOff {
		log.Warn("the directory's rate limits are off (--limits off): a test rig, never a server that faces the network")
	}
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

	// A node that joins a cluster takes the cluster's secrets; checked
	// before anything is created.
	joining := !runDir || o.RelayNATS != "" || isPostgresURL(o.DirectoryDB)
	if err := o.secretSources.check(o.Data, joining); err != nil {
		return err
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
	where = append(where, "data", o.Data)
	if runRelay {
		where = append(where, "archive_cap", cmp.Or(o.ArchiveCap, relay.DefaultArchiveCap), "archive_ttl", cmp.Or(o.ArchiveTTL, relay.DefaultArchiveTTL).String())
	}
	log.Info("tally serve starting", where...)
	if o.LogClients {
		log.Warn("--log-clients: the logs name client addresses, account ids and channels; turn it off once done debugging")
	}
	if len(o.TrustedProxies) == 0 && (isLoopback(o.APIAddr) || isLoopback(o.RelayAddr)) {
		log.Info("no --trusted-proxy: behind a reverse proxy every client counts as the proxy's one address, " +
			"which then holds one address's share of sign-ins and relay sockets for everyone; name the proxy with --trusted-proxy")
	}
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
	jwtSecret, internal, err := o.secretSources.load(o.Data)
	if err != nil {
		return err
	}
	reqLog := log
	if o.Quiet {
		reqLog = slog.New(quietHandler{log.Handler()})
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
		InternalSecret: internal, Logger: planeLogger(reqLog, "directory"),
		TrustedProxies: o.TrustedProxies, LogClients: o.LogClients,
	}
	dcfg.Limits.ReadsPerAccount, dcfg.Limits.ReadBytes = o.DirectoryReadsPerAccount, o.DirectoryReadBytes
	dcfg.Limits.Off = o.LimitsOff
	if o.DirectoryDB != "" {
		dcfg.DBPath, dcfg.Database = "", o.DirectoryDB
	}
	if isPostgresURL(o.DirectoryDB) {
		dcfg.Backend = pgstore.Backend{}
	}

	rcfg := skytale.RelayConfig{
		DBPath: filepath.Join(o.Data, relayDB), JWTSecret: jwtSecret,
		Logger: planeLogger(reqLog, "relay"), LogClients: o.LogClients,
		NATSURL: o.RelayNATS, NATSStream: o.NATSStream, NATSReplicas: o.NATSReplicas,
		ReadyFeedLag: o.ReadyFeedLag, ArchiveCap: o.ArchiveCap, ArchiveTTL: o.ArchiveTTL,
	}
	// Every open connection is a file descriptor: the caps of all planes
	// together stay below the process's limit.
	nPlanes := len(planes)
	if o.MetricsAddr != "" {
		nPlanes++
	}
	maxConns := o.MaxConns
	if n := openFileLimit(); n > 0 {
		maxConns = max(1, min(maxConns, (n-fdReserve)/nPlanes))
	}
	o.relayAdmission(&rcfg, maxConns)
	o.applyBudgets(&dcfg, &rcfg, open)
	var reg *prometheus.Registry
	if o.MetricsAddr != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	handlers := make([]*planeHandler, len(planes))
	for i := range planes {
		handlers[i] = &planeHandler{name: planes[i].name, start: time.Now()}
		planes[i].h = handlers[i]
	}
	// build makes the planes' servers and hands them to their handlers.
	build := func() error {
		dcfg, rcfg := dcfg, rcfg
		var servers []planeServer
		if reg != nil {
			// A failed build's collectors are taken off again, so the
			// next one can register its own.
			tr := &trackingRegisterer{reg: reg}
			dcfg.Metrics, rcfg.Metrics = dirmetrics.New(tr), tr
			defer func() {
				if servers == nil {
					tr.undo()
				}
			}()
		}
		switch {
		case runDir && runRelay:
			st, err := skytale.NewStack(skytale.StackConfig{JWTSecret: jwtSecret, InternalSecret: internal, Directory: dcfg, Relay: rcfg})
			if err != nil {
				return err
			}
			closers = append(closers, st.Close)
			servers = []planeServer{st.Directory, st.Relay}
		case runDir:
			relayURL := o.RelayURL
			if relayURL == "" {
				relayURL = "http://" + o.RelayAddr
			}
			// A directory apart from its relay reads the commit fence
			// (which GroupInfo epochs it keeps) from the relay's internal
			// endpoint.
			dcfg.Fence = directory.NewHTTPFence(relayURL, string(internal), nil)
			d, err := skytale.NewDirectory(dcfg)
			if err != nil {
				return err
			}
			closers = append(closers, d.Close)
			servers = []planeServer{d}
		default:
			dirURL := o.DirectoryURL
			if dirURL == "" {
				dirURL = "http://" + o.APIAddr
			}
			// A relay apart from its directory learns revocations and
			// channel members by polling the directory's internal feeds.
			rcfg.Revocations = relay.NewHTTPRevocations(dirURL, string(internal), nil)
			rcfg.Members = relay.NewHTTPMembers(dirURL, string(internal), nil)
			rcfg.InternalSecret = internal
			r, err := skytale.NewRelay(rcfg)
			if err != nil {
				return err
			}
			closers = append(closers, r.Close)
			servers = []planeServer{r}
		}
		for i, srv := range servers {
			handlers[i].set(srv)
		}
		return nil
	}
	gparent, cancelAll := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(gparent)
	// Whatever returns, the goroutines end before the planes close.
	defer func() { cancelAll(); g.Wait() }()
	if err := build(); errors.Is(err, relay.ErrNATSUnreachable) {
		// The relay waits for NATS, answering not ready, instead of
		// exiting: NATS may start after it (a reboot, a cluster coming up).
		log.Warn("NATS is unreachable: serving GET /ready 503 and trying again every "+natsRetry.String(), "err", err)
		for _, h := range handlers {
			h.waiting("waiting for NATS")
		}
		g.Go(func() error {
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-time.After(natsRetry):
				}
				err := build()
				if err == nil {
					log.Info("NATS reachable: the relay serves")
					return nil
				}
				if !errors.Is(err, relay.ErrNATSUnreachable) {
					return err
				}
			}
		})
	} else if err != nil {
		return err
	}
	health := healthHandler(planes)
	if reg != nil {
		// Health and readiness are where a monitor that scrapes the
		// metrics looks too.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("GET /health", health)
		mux.Handle("GET /ready", health)
		planes = append(planes, plane{name: "metrics", addr: o.MetricsAddr, h: mux})
	}
	if o.HealthAddr != "" {
		planes = append(planes, plane{name: "health", addr: o.HealthAddr, h: health})
	}

	for _, p := range planes {
		tl, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		ln, srv := o.listener(p, tl, maxConns)
		url := "http://" + tl.Addr().String()
		attrs := []any{"url", url}
		if p.name == "directory" {
			attrs = append(attrs, "open_signup", open)
		}
		if p.name != "health" {
			attrs = append(attrs, "max_conns", maxConns)
		}
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

// listener wraps a plane's TCP listener and makes its HTTP server: the
// PROXY header from trusted proxies (--proxy-protocol) first, so the caps
// see the clients, then the connection caps. The health listener has a
// small cap of its own and short timeouts, and neither per-address caps
// nor PROXY headers: it is for the operator's load balancer or monitor,
// not the public.
func (o *serveOptions) listener(p plane, tl net.Listener, maxConns int) (*httpx.LimitListener, *http.Server) {
	if p.name == "health" {
		ln := httpx.NewLimitListener(tl, httpx.LimitOptions{Max: healthMaxConns})
		return ln, &http.Server{Handler: p.h, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
			WriteTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 8 << 10, ConnState: ln.ConnState}
	}
	var base net.Listener = tl
	if o.ProxyProtocol {
		base = clientaddr.NewListener(tl, o.TrustedProxies, 0)
	}
	// A TLS proxy on loopback carries every client, as does a trusted
	// proxy that does not send PROXY headers.
	exempt := netip.Addr.IsLoopback
	if len(o.TrustedProxies) > 0 {
		trusted := o.TrustedProxies
		exempt = func(a netip.Addr) bool { return clientaddr.Trusted(trusted, a) }
	}
	ln := httpx.NewLimitListener(base, httpx.LimitOptions{
		Max: maxConns, MaxPerAddr: o.MaxConnsPerIP, MaxPerNet: o.MaxConnsPerNet, MaxIdlePerAddr: o.MaxIdlePerIP,
		ExemptAddr: exempt,
	})
	// The deadlines hold until a WebSocket takes the connection over:
	// net/http clears them when the relay hijacks it, and the relay
	// sets its own per write.
	return ln, &http.Server{
		Handler:           p.h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnState:         ln.ConnState,
	}
}

// healthMaxConns bounds the health listener's connections: room for a
// few monitors and a load balancer's checks from each of its nodes, while
// a flood that reached this listener too could hold no more than 64 file
// descriptors.
const healthMaxConns = 64

// healthHandler answers GET /health on the health listener: the relay's
// answer when it runs here, else the directory's; and GET /ready: 200
// when every plane served here is ready, else 503 naming the first that
// is not. Neither takes a lock or a limiter that a flood of connections
// contends.
func healthHandler(planes []plane) http.Handler {
	h := planes[0].h
	var ready []*planeHandler
	for _, p := range planes {
		if p.name == "relay" {
			h = p.h
		}
		if ph, ok := p.h.(*planeHandler); ok {
			ready = append(ready, ph)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /health", h)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		for _, p := range ready {
			if err := p.Ready(r.Context()); err != nil {
				w.Header().Set("Retry-After", "1")
				httpx.WriteError(w, http.StatusServiceUnavailable, "unavailable", p.name+" not ready: "+err.Error())
				return
			}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	return mux
}

// relayAdmission sets the relay's admission from the flags: its
// WebSockets stay an eighth below the listener's cap, so HTTP requests
// (reads, health) find room however many sockets are open.
func (o *serveOptions) relayAdmission(rcfg *relay.Config, listenerCap int) {
	rcfg.TrustedProxies = o.TrustedProxies
	rcfg.MaxConns = o.RelayMaxConns
	if rcfg.MaxConns <= 0 {
		rcfg.MaxConns = max(2, listenerCap-listenerCap/8)
	}
	rcfg.MaxUnauthConns = o.RelayLoginReserve
	rcfg.MaxConnsPerAddr, rcfg.MaxConnsPerNet = o.RelayConnsPerIP, o.RelayConnsPerNet
	rcfg.MaxUnauthConnsPerAddr, rcfg.MaxUnauthConnsPerNet = o.RelayLoginsPerIP, o.RelayLoginsPerNet
	rcfg.PingInterval, rcfg.PingTimeout = o.RelayPingInterval, o.RelayPingTimeout
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
