package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/directory/dirmetrics"
	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/admin"
	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/relay/jsarchive"
	"github.com/skytale-oss/skytale/relay/relaymetrics"
)

// The planes of tally serve: which run, the data folder they keep, and
// how they are built (again and again while NATS is unreachable).

// servedPlanes are the planes o runs, with their databases in the data
// folder.
func (o *serveOptions) servedPlanes() ([]plane, error) {
	runDir, runRelay := true, true
	switch o.Only {
	case "":
	case "directory":
		runRelay = false
	case "relay":
		runDir = false
	default:
		return nil, badUsage(fmt.Sprintf("unknown plane %q", o.Only), "use --only directory or --only relay")
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
	return planes, nil
}

// logger is serve's log: text or JSON on logw, its error records kept
// in ring too.
func (o *serveOptions) logger(logw interface{ Write([]byte) (int, error) }, ring *admin.ErrorRing) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: o.LogLevel}
	var h slog.Handler = slog.NewTextHandler(logw, hopts)
	if o.LogFormat == "json" {
		h = slog.NewJSONHandler(logw, hopts)
	}
	return slog.New(ring.Handler(h))
}

// checkPlainHTTP refuses plain HTTP on a non-loopback address unless
// --insecure-http, and then warns.
func (o *serveOptions) checkPlainHTTP(planes []plane, log *slog.Logger) error {
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
	return nil
}

// takeDataFolder prepares the data folder and takes its lock of each
// plane (released by the returned function), says where serve runs, and
// checks that the folder and the databases can be written.
func (o *serveOptions) takeDataFolder(ctx context.Context, planes []plane, log *slog.Logger) (release func(), err error) {
	if err := datadir.Prepare(o.Data); err != nil {
		return nil, err
	}
	var locks []*datadir.Locked
	unlock := func() {
		for i := len(locks) - 1; i >= 0; i-- {
			locks[i].Unlock()
		}
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	for _, p := range planes {
		lockPath := filepath.Join(o.Data, p.name+".lock")
		l, err := datadir.Lock(lockPath)
		if errors.Is(err, datadir.ErrLocked) {
			return nil, fmt.Errorf("data folder %s is in use: another tally serve runs its %s there (it holds %s); stop it or choose another --data", o.Data, p.name, lockPath)
		}
		if err != nil {
			return nil, err
		}
		locks = append(locks, l)
	}
	o.logStart(planes, log)
	if err := datadir.Secure(o.Data); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	for _, p := range planes {
		if p.db == "" {
			continue
		}
		if err := datadir.CheckWritable(o.Data, p.db, p.db+"-wal", p.db+"-shm"); err != nil {
			return nil, fmt.Errorf("%w: fix the owner or mode, or choose another --data", err)
		}
		if err := datadir.CheckDB(ctx, filepath.Join(o.Data, p.db)); err != nil {
			return nil, fmt.Errorf("%s database: %w", p.name, err)
		}
	}
	return unlock, nil
}

// logStart says at once, once the data folder is locked and before the
// databases open, that serve runs and where to look, with the warnings
// about its settings.
func (o *serveOptions) logStart(planes []plane, log *slog.Logger) {
	var where []any
	runRelay := false
	for _, p := range planes {
		addr := o.APIAddr
		if p.name == "relay" {
			addr, runRelay = o.RelayAddr, true
		}
		where = append(where, p.name, "http://"+addr)
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
}

// connCaps are the listeners' connection caps, by plane name (planes are
// the public ones): every open connection is a file descriptor, so the
// caps of all listeners together stay below openFiles, the process's
// limit (0 when unknown). The health and metrics listeners take
// small fixed caps; the public planes share the rest, each up to
// --max-conns, the relay three parts to the directory's one (its
// WebSockets live as long as a device is online, the directory's requests
// a moment), and what one plane does not use goes to the other.
func (o *serveOptions) connCaps(planes []plane, openFiles int) map[string]int {
	caps := map[string]int{"health": healthMaxConns, "metrics": metricsMaxConns}
	budget := openFiles - fdReserve
	if o.MetricsAddr != "" {
		budget -= metricsMaxConns
	}
	if o.HealthAddr != "" {
		budget -= healthMaxConns
	}
	var public []string
	for _, p := range planes {
		public = append(public, p.name)
	}
	weight := func(name string) int {
		if name == "relay" {
			return 3
		}
		return 1
	}
	// The planes whose --max-conns fits their share take it and leave the
	// rest to the others, until none fits: those split what is left.
	for len(public) > 0 {
		total := 0
		for _, name := range public {
			total += weight(name)
		}
		var rest []string
		for _, name := range public {
			if openFiles <= 0 || o.MaxConns <= budget*weight(name)/total {
				caps[name] = o.MaxConns
			} else {
				rest = append(rest, name)
			}
		}
		if len(rest) == len(public) {
			for _, name := range rest {
				caps[name] = max(1, budget*weight(name)/total)
			}
			break
		}
		budget -= o.MaxConns * (len(public) - len(rest))
		public = rest
	}
	return caps
}

// planeConfigs are the planes' configurations from o.
func (o *serveOptions) planeConfigs(jwtSecret, internal []byte, reqLog *slog.Logger, maxConns int) (skytale.DirectoryConfig, relay.Config) {
	dcfg := skytale.DirectoryConfig{
		DBPath: filepath.Join(o.Data, "directory.db"), JWTSecret: jwtSecret,
		InternalSecret: internal, Logger: planeLogger(reqLog, "directory"),
		TrustedProxies: o.TrustedProxies, LogClients: o.LogClients,
	}
	dcfg.Limits = o.DirectoryLimits
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
		ReadyFeedLag: o.ReadyFeedLag, ArchiveCap: o.ArchiveCap, ArchiveTTL: o.ArchiveTTL,
		NoSync: benchNoFlush,
	}
	if o.RelayNATS != "" {
		rcfg.Archive = jsarchive.New(jsarchive.Config{URL: o.RelayNATS, Stream: o.NATSStream, Replicas: o.NATSReplicas})
	}
	o.relayAdmission(&rcfg, maxConns)
	o.applyBudgets(&dcfg, &rcfg)
	return dcfg, rcfg
}

// newRegistry is the metrics' registry with the Go runtime's and the
// process's collectors, or nil without --metrics-addr.
func (o *serveOptions) newRegistry() *prometheus.Registry {
	if o.MetricsAddr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// planeBuilder makes the planes' servers and hands them to their
// handlers; what it built is closed by close.
type planeBuilder struct {
	o                   *serveOptions
	dcfg                skytale.DirectoryConfig
	rcfg                relay.Config
	jwtSecret, internal []byte
	reg                 *prometheus.Registry
	handlers            []*planeHandler
	runDir, runRelay    bool
	// closers are run by close; build appends to them, and close runs
	// once every goroutine that builds has returned.
	closers []func(context.Context) error
}

// newPlaneBuilder gives each plane its handler, which answers while its
// server is being built.
func newPlaneBuilder(o *serveOptions, planes []plane, dcfg skytale.DirectoryConfig, rcfg relay.Config, jwtSecret, internal []byte, reg *prometheus.Registry) *planeBuilder {
	b := &planeBuilder{o: o, dcfg: dcfg, rcfg: rcfg, jwtSecret: jwtSecret, internal: internal, reg: reg}
	for i := range planes {
		b.handlers = append(b.handlers, &planeHandler{name: planes[i].name, start: time.Now()})
		planes[i].h = b.handlers[i]
		b.runDir = b.runDir || planes[i].name == "directory"
		b.runRelay = b.runRelay || planes[i].name == "relay"
	}
	return b
}

// build makes the planes' servers and hands them to their handlers.
func (b *planeBuilder) build(ctx context.Context) error {
	dcfg, rcfg := b.dcfg, b.rcfg
	var servers []planeServer
	if b.reg != nil {
		// A failed build's collectors are taken off again, so the next
		// one can register its own.
		tr := &trackingRegisterer{reg: b.reg}
		dcfg.Metrics, rcfg.Metrics = dirmetrics.New(tr), relaymetrics.New(tr)
		defer func() {
			if servers == nil {
				tr.undo()
			}
		}()
	}
	switch {
	case b.runDir && b.runRelay:
		st, err := skytale.NewStack(ctx, skytale.StackConfig{JWTSecret: b.jwtSecret, InternalSecret: b.internal, Directory: dcfg, Relay: rcfg})
		if err != nil {
			return err
		}
		b.closers = append(b.closers, st.Close)
		servers = []planeServer{st.Directory, st.Relay}
	case b.runDir:
		relayURL := cmp.Or(b.o.RelayURL, "http://"+b.o.RelayAddr)
		// A directory apart from its relay reads the commit fence (which
		// GroupInfo epochs it keeps) from the relay's internal endpoint.
		dcfg.Fence = directory.NewHTTPFence(relayURL, string(b.internal), nil)
		d, err := skytale.NewDirectory(ctx, dcfg)
		if err != nil {
			return err
		}
		b.closers = append(b.closers, d.Close)
		servers = []planeServer{d}
	default:
		dirURL := cmp.Or(b.o.DirectoryURL, "http://"+b.o.APIAddr)
		// A relay apart from its directory learns revocations and channel
		// members by polling the directory's internal feeds.
		rcfg.Revocations = relay.NewHTTPRevocations(dirURL, string(b.internal), nil)
		rcfg.Members = relay.NewHTTPMembers(dirURL, string(b.internal), nil)
		rcfg.InternalSecret = b.internal
		r, err := skytale.NewRelay(ctx, rcfg)
		if err != nil {
			return err
		}
		b.closers = append(b.closers, r.Close)
		servers = []planeServer{r}
	}
	for i, srv := range servers {
		b.handlers[i].set(srv)
	}
	return nil
}

// start builds the planes. While NATS is unreachable the relay answers
// not ready and is built again every natsRetry in g, instead of serve
// exiting: NATS may start after it (a reboot, a cluster coming up).
func (b *planeBuilder) start(ctx context.Context, g *errgroup.Group, log *slog.Logger) error {
	err := b.build(ctx)
	if !errors.Is(err, relay.ErrArchiveUnreachable) {
		return err
	}
	log.Warn("NATS is unreachable: serving GET /ready 503 and trying again every "+natsRetry.String(), "err", err)
	for _, h := range b.handlers {
		h.waiting("waiting for NATS")
	}
	g.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(natsRetry):
			}
			err := b.build(ctx)
			if err == nil {
				log.Info("NATS reachable: the relay serves")
				return nil
			}
			if !errors.Is(err, relay.ErrArchiveUnreachable) {
				return err
			}
		}
	})
	return nil
}

// close closes what was built, within 30 seconds.
func (b *planeBuilder) close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range b.closers {
		if err := c(ctx); err != nil {
			log.Error("close", "err", err)
		}
	}
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
	rcfg.MaxConnsPerAccount, rcfg.MaxPageBytes = o.RelayConnsPerAccount, o.RelayPageBytes
}
