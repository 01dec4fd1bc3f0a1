package relay

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/relay/jsarchive"
)

// natsServer is a real nats-server with JetStream on file storage, run in
// the test process on loopback.
type natsServer struct {
	t    testing.TB
	dir  string
	port int
	srv  *natsserver.Server
	URL  string
	// maxPayload is the server's max_payload; 0 means 8 MiB.
	maxPayload int32
	// A server of a NATS cluster: its name, its route port and the
	// routes to the others (see natsCluster).
	name        string
	clusterPort int
	routes      string
}

// startNATS starts a nats-server on a random loopback port with its
// JetStream store in a temporary directory; the cleanup shuts it down.
func startNATS(t testing.TB) *natsServer {
	t.Helper()
	n := &natsServer{t: t, dir: t.TempDir(), port: -1}
	n.start()
	t.Cleanup(n.shutdown)
	return n
}

func (n *natsServer) start() {
	n.t.Helper()
	opts := &natsserver.Options{
		Host:       "127.0.0.1",
		Port:       n.port,
		JetStream:  true,
		StoreDir:   n.dir,
		MaxPayload: cmp.Or(n.maxPayload, 8<<20),
		// Acknowledged means on disk, as the SQLite archive's fsync.
		// RELAY_BENCH_NATS_SYNC=interval keeps nats-server's default
		// instead (synced every two minutes; an ack survives a crash of
		// the server's process, not of the machine), for comparison.
		SyncAlways: os.Getenv("RELAY_BENCH_NATS_SYNC") != "interval",
		NoLog:      true,
		NoSigs:     true,
	}
	if n.clusterPort != 0 {
		opts.ServerName = n.name
		opts.Cluster = natsserver.ClusterOpts{Name: "skytale-test", Host: "127.0.0.1", Port: n.clusterPort}
		opts.Routes = natsserver.RoutesFromStr(n.routes)
	}
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		n.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats-server did not start")
	}
	n.srv = srv
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	n.port, _ = strconv.Atoi(port)
	n.URL = fmt.Sprintf("nats://127.0.0.1:%d", n.port)
}

// shutdown stops the server; restart starts it again on the same port
// and store.
func (n *natsServer) shutdown() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

func (n *natsServer) restart() {
	n.t.Helper()
	n.shutdown()
	n.start()
}

// testBackend is one of the archives a contract test runs against.
type testBackend struct {
	name string
	nats *natsServer // nil for SQLite
}

// forBackends runs a contract test against the SQLite archive and the
// JetStream archive. For JetStream, every relay the test starts through
// b.start shares one nats-server, so a relay started again finds the
// archive the earlier one left, as with the same SQLite file.
func forBackends(t *testing.T, f func(t *testing.T, b *testBackend)) {
	t.Run("sqlite", func(t *testing.T) { f(t, &testBackend{name: "sqlite"}) })
	t.Run("jetstream", func(t *testing.T) { f(t, &testBackend{name: "jetstream", nats: startNATS(t)}) })
}

// start starts a relay on the backend.
func (b *testBackend) start(t testing.TB, cfg Config) *testRelay {
	t.Helper()
	return startRelay(t, b.config(cfg))
}

// config points cfg at the backend. A relay without a DBPath has a fresh
// in-memory SQLite archive, so on JetStream it gets a stream of its own;
// relays given the same DBPath share a stream, as they share the file.
func (b *testBackend) config(cfg Config) Config {
	if b.nats != nil {
		jc, _ := jsConfig(cfg)
		jc.URL = b.nats.URL
		if jc.Stream == "" {
			if cfg.DBPath == "" {
				jc.Stream = fmt.Sprintf("FRESH%d", freshStreams.Add(1))
			} else {
				sum := sha256.Sum256([]byte(cfg.DBPath))
				jc.Stream = "DB" + hex.EncodeToString(sum[:8])
			}
		}
		cfg.Archive = jsarchive.New(jc)
	}
	return cfg
}

// withJS is cfg with its archive on the JetStream stream of the NATS at
// url (stream "" for the default; replicas 0 for the stream's).
func withJS(cfg Config, url, stream string, replicas int) Config {
	cfg.Archive = jsarchive.New(jsarchive.Config{URL: url, Stream: stream, Replicas: replicas})
	return cfg
}

// jsConfig is the JetStream archive's settings of cfg, as given (no
// defaults filled); false for a relay on SQLite.
func jsConfig(cfg Config) (jsarchive.Config, bool) {
	b, ok := cfg.Archive.(*jsarchive.Backend)
	if !ok {
		return jsarchive.Config{}, false
	}
	return b.Config(), true
}

var freshStreams atomic.Int64

// jsClient is a JetStream client of the NATS at url, closed when the test
// ends: the tests look into the stream with it, or write to it as a relay
// of an older build would.
func jsClient(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// storedMsgs counts the messages the JetStream stream of a relay on
// JetStream holds on a channel's handshake subject (hs) or application
// subject; ok is false for a relay on SQLite.
func storedMsgs(t testing.TB, tr *testRelay, channel string, hs bool) (n int, ok bool) {
	t.Helper()
	jc, ok := jsConfig(tr.cfg)
	if !ok {
		return 0, false
	}
	stream := cmp.Or(jc.Stream, jsarchive.DefaultStream)
	subject := jsarchive.AppSubject(stream, channel)
	if hs {
		subject = jsarchive.HandshakeSubject(stream, channel)
	}
	js := jsClient(t, jc.URL)
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[subject]), true
}
