package sqlitearchive

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/leakcheck"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

// The archive's own tests open it without a relay: entries go in through
// its pipeline (storeDirect) and come out through its pages (readAll).
// What a relay adds (sockets, tokens, fan-out) is tested with the relay,
// whose contract suite runs over this archive and JetStream's.

// TestMain fails the run if a goroutine of an archive outlives the tests.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run, os.Stderr)) }

const (
	chA   = "acme/payments/agent-v1"
	chLog = "acme/payments/log"
)

// nobody is a hub without subscribers.
type nobody struct{}

func (nobody) Fanout(string, []byte, *backend.PushBuf, uint64) {}

// unlimited is a budget no test reaches.
var unlimited = backend.Limits{Account: math.MaxInt64, Group: math.MaxInt64, Org: math.MaxInt64, Server: math.MaxInt64}

// openTest opens and starts an archive in the database file path ("" for
// one in memory) with the account quota quota (0 for none), as a relay
// with its defaults does; the test's cleanup stops and closes it.
func openTest(t testing.TB, path string, quota int64) *Archive {
	t.Helper()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	limits := unlimited
	if quota > 0 {
		limits.Account = quota
	}
	a, err := openArchive(context.Background(), Config{DB: db, Path: path, NoSync: true}, backend.Env{
		Hub: nobody{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now,
		Granularity: time.Second, Cap: 10000, TTL: 24 * time.Hour, MaxFirstEpoch: 1 << 32,
		MaxPayload: 1 << 20, MaxHandshakePayload: seglog.MaxPayload,
		Budgets:       func(int64) backend.Limits { return limits },
		SweepInterval: 30 * time.Second,
	})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() {
		a.Stop()
		a.Close()
		db.Close()
	})
	return a
}

// app and commit are the headers of an application message and of a
// commit for epoch.
var app = header{entryType: backend.EntryApp}

func commit(epoch uint64) header { return header{entryType: 1, commit: true, epoch: epoch} }

// storeDirect stores one entry through the archive's pipeline, as a
// socket's publish does, and returns its request once answered and
// readable.
func storeDirect(t testing.TB, a *Archive, sub, channel string, payload []byte, hdr header) *pubReq {
	t.Helper()
	done := make(chan error, 1)
	r := &pubReq{sub: sub, channel: channel, payload: payload, hdr: hdr, done: done}
	a.submit(r)
	if err := <-done; err != nil {
		t.Fatalf("store: %v", err)
	}
	if err := a.WaitVisible(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// pageEntry is an entry of a page as a client reads it.
type pageEntry struct {
	Seq     uint64 `json:"seq"`
	Type    uint8  `json:"entry_type"`
	Payload string `json:"payload"`
}

// page reads one page of GET /v1/sync from the archive.
func page(t testing.TB, a *Archive, channel string, since uint64, maxBytes int) (entries []pageEntry, more bool) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := a.WritePage(context.Background(), &buf, func() {}, channel, since, 100, maxBytes, false); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Entries []pageEntry `json:"entries"`
		HasMore bool        `json:"has_more"`
	}
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	return m.Entries, m.HasMore
}

// readAll reads a channel's entries, page after page, by seq.
func readAll(t testing.TB, a *Archive, channel string) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	since := uint64(0)
	for {
		es, more := page(t, a, channel, since, 4<<20)
		for _, e := range es {
			p, err := base64.StdEncoding.DecodeString(e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Seq] = p
			since = e.Seq
		}
		if !more || len(es) == 0 {
			return out
		}
	}
}
