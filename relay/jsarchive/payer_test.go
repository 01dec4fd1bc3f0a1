package jsarchive

import (
	"context"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// startNATS runs an in-process nats-server with JetStream on files in the
// test's folder.
func startNATS(t *testing.T) string {
	t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), MaxPayload: 8 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return srv.ClientURL()
}

// nobody is a hub without subscribers.
type nobody struct{}

func (nobody) Fanout(string, []byte, *backend.PushBuf, uint64) {}

// openTest opens an archive on the stream of the NATS at url, as a relay
// would, until the test ends.
func openTest(t *testing.T, url, stream string) *archive {
	t.Helper()
	a, err := open(context.Background(), backend.Env{
		Hub: nobody{}, Now: time.Now, Cap: 1000, TTL: time.Hour, MaxFirstEpoch: 1 << 20,
		MaxPayload: 1 << 20, MaxHandshakePayload: 1 << 20,
		Budgets: func(int64) backend.Limits {
			return backend.Limits{Account: 1 << 30, Group: 1 << 30, Org: 1 << 30, Server: 1 << 40}
		},
		ReadyCheckEvery: time.Second, SweepInterval: time.Minute,
	}, Config{URL: url, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() {
		a.Stop()
		a.Close()
	})
	return a
}

// TestPayerRecordRace: two relays writing a new channel's payer record
// agree on one payer, the one whose record was stored first: the other
// reads it, and the bucket holds one record.
func TestPayerRecordRace(t *testing.T) {
	url := startNATS(t)
	a, b := openTest(t, url, "RACE"), openTest(t, url, "RACE")
	const ch = "acme/payer/race"
	first, err := a.writePayer(ch, "alice")
	if err != nil || first != "alice" {
		t.Fatalf("the first record names %q (%v), want alice", first, err)
	}
	second, err := b.writePayer(ch, "bob")
	if err != nil || second != "alice" {
		t.Fatalf("the second relay reads %q (%v), want alice", second, err)
	}
	if st, err := a.payers.Status(t.Context()); err != nil || st.Values() != 1 {
		t.Fatalf("payer records: %v, %v; want 1", st, err)
	}
	if rec, err := b.readPayer(ch); err != nil || rec != "alice" {
		t.Fatalf("reading the record: %q, %v; want alice", rec, err)
	}
}
