package cli

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/clientaddr"
	"github.com/skytale-oss/skytale/relay"
)

// serveFlags are the flags of tally serve: its listeners, data,
// logs, archive, cluster and admission here; the budgets in
// serve_budget.go and the rate limits in serve_limits.go.
func serveFlags() []ucli.Flag {
	fs := []ucli.Flag{
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
	}
	return append(append(fs, budgetFlags()...), limitFlags()...)
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
	if err := opts.limitFlagsInto(c); err != nil {
		return opts, err
	}
	if c.IsSet("open-signup") {
		v := c.Bool("open-signup")
		opts.OpenSignup = &v
	}
	return opts, nil
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

// admissionFlags reads the admission flags into o.
func (o *serveOptions) admissionFlags(c *ucli.Context) error {
	if v := c.String("trusted-proxy"); v != "" {
		p, err := clientaddr.ParsePrefixes(v)
		if err != nil {
			return badUsage(err.Error(), "--trusted-proxy takes CIDR prefixes or addresses, separated by commas")
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
