package directory

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/pgtest"
)

// BenchmarkMintToken measures POST /v1/tokens over loopback HTTP: API key
// lookup, revocation check and HS256 signing.
func BenchmarkMintToken(b *testing.B) {
	benchMintToken(b, "")
}

// BenchmarkMintTokenPostgres is BenchmarkMintToken on PostgreSQL (a local
// server on a Unix socket).
func BenchmarkMintTokenPostgres(b *testing.B) {
	benchMintToken(b, postgresURL(b))
}

func benchMintToken(b *testing.B, database string) {
	e := newEnv(b, func(c *Config) { c.Database = database })
	_, key := e.account("acme")
	b.ResetTimer()
	for b.Loop() {
		if r := e.do("POST", "/v1/tokens", key, nil); r.status != 201 {
			b.Fatal(r)
		}
	}
}

// BenchmarkJoinAdmit measures one joiner/owner round: POST /join with a
// 1 KiB key package, GET /pending, POST /welcome, over loopback HTTP with
// an in-memory database.
func BenchmarkJoinAdmit(b *testing.B) {
	benchJoinAdmit(b, "")
}

// BenchmarkJoinAdmitFile is BenchmarkJoinAdmit on a file database (WAL,
// synchronous=FULL): each write is an fsync'd commit.
func BenchmarkJoinAdmitFile(b *testing.B) {
	benchJoinAdmit(b, b.TempDir()+"/dir.db")
}

// BenchmarkJoinAdmitPostgres is BenchmarkJoinAdmit on PostgreSQL, on the
// tests' server: a local server on a Unix socket with fsync off, like the
// in-memory SQLite of BenchmarkJoinAdmit in that a commit waits for no
// disk.
func BenchmarkJoinAdmitPostgres(b *testing.B) {
	benchJoinAdmit(b, postgresURL(b))
}

// BenchmarkJoinAdmitPostgresDurable is BenchmarkJoinAdmit on a PostgreSQL
// server of its own with fsync and synchronous commit on, as in
// production: each write waits for its WAL flush, like the SQLite file of
// BenchmarkJoinAdmitFile.
func BenchmarkJoinAdmitPostgresDurable(b *testing.B) {
	srv, err := pgtest.Start(pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrUnavailable) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	u, err := srv.NewSchema(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	benchJoinAdmit(b, u)
}

// BenchmarkJoinParallelPostgres and BenchmarkJoinParallelFile measure
// POST /join from parallel clients (GOMAXPROCS of them), each joining a
// channel of its own: SQLite takes one writer at a time, PostgreSQL
// commits the joins of different channels side by side.
func BenchmarkJoinParallelPostgres(b *testing.B) {
	benchJoinParallel(b, postgresURL(b))
}

func BenchmarkJoinParallelFile(b *testing.B) {
	benchJoinParallel(b, b.TempDir()+"/dir.db")
}

func benchJoinParallel(b *testing.B, database string) {
	e := newEnv(b, func(c *Config) { c.Database = database })
	_, owner := e.account("acme")
	_, joiner := e.account("globex")
	kp := make([]byte, 1024)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := n.Add(1)
		var ch, inv string
		for i := 0; pb.Next(); i++ {
			if i%900 == 0 { // a fresh channel before the pending cap
				ch = fmt.Sprintf("acme/bench/w%d-%d", w, i)
				e.channel(owner, ch)
			}
			if i%100 == 0 {
				inv = e.invite(owner, ch, 100)
			}
			if r := e.join(joiner, ch, inv, fmt.Sprint("did:web:", w, "-", i), kp); r.status != 201 {
				b.Fatal(r)
			}
		}
	})
}

func benchJoinAdmit(b *testing.B, database string) {
	e := newEnv(b, func(c *Config) { c.Database = database })
	_, owner := e.account("acme")
	_, joiner := e.account("globex")
	const ch = "acme/bench/agent"
	e.channel(owner, ch)
	kp := make([]byte, 1024)
	welcome := base64.StdEncoding.EncodeToString(make([]byte, 4096))
	var inv string
	i := 0
	b.ResetTimer()
	for b.Loop() {
		if i%100 == 0 {
			inv = e.invite(owner, ch, 100)
		}
		r := e.join(joiner, ch, inv, fmt.Sprint("did:web:", i), kp)
		if r.status != 201 {
			b.Fatal(r)
		}
		p := e.do("GET", "/v1/channels/pending?channel="+ch, owner, nil)
		if len(p.body["requests"].([]any)) != 1 {
			b.Fatal(p)
		}
		if w := e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": r.str("request_id"), "welcome": welcome}); w.status != 200 {
			b.Fatal(w)
		}
		i++
	}
}

// BenchmarkMintTokenLimited is BenchmarkMintToken with the rate limits on
// (buckets too large to refuse), to show what the two bucket checks cost
// per request.
func BenchmarkMintTokenLimited(b *testing.B) {
	big := Bucket{Burst: 1 << 30, Every: time.Nanosecond}
	e := newEnv(b, withLimits(Limits{Token: Rate{PerAddr: big, PerAccount: big}}))
	_, key := e.account("acme")
	b.ResetTimer()
	for b.Loop() {
		if r := e.do("POST", "/v1/tokens", key, nil); r.status != 201 {
			b.Fatal(r)
		}
	}
}

// BenchmarkAddOffline measures adding a person who is offline, over
// loopback HTTP: POST /v1/keypackages/claim (one 1 KiB one-time key
// package of one device, consumed) and POST /v1/inbox with a 4 KiB
// Welcome. The person's stock is topped up outside the timer.
func BenchmarkAddOffline(b *testing.B) { benchAddOffline(b, "") }

// BenchmarkAddOfflineFile is BenchmarkAddOffline on a file database (WAL,
// synchronous=FULL).
func BenchmarkAddOfflineFile(b *testing.B) { benchAddOffline(b, b.TempDir()+"/dir.db") }

// BenchmarkAddOfflinePostgres is BenchmarkAddOffline on the tests'
// PostgreSQL server.
func BenchmarkAddOfflinePostgres(b *testing.B) { benchAddOffline(b, postgresURL(b)) }

func benchAddOffline(b *testing.B, database string) {
	e := newEnv(b, func(c *Config) { c.Database = database })
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	kp := base64.StdEncoding.EncodeToString(make([]byte, 1024))
	welcome := base64.StdEncoding.EncodeToString(make([]byte, 4096))
	var targetID, target string
	n := 0
	b.ResetTimer()
	for b.Loop() {
		if n%MaxInboxPerSender == 0 {
			// A fresh person every MaxInboxPerSender adds (one sender's
			// share of an inbox, and no more than its share of a device's
			// one-time key packages an hour), who shares a room with the
			// adder, with that many one-time key packages.
			b.StopTimer()
			targetID, target = e.account(fmt.Sprint("person", n))
			e.relate(target, owner)
			kps := make([]string, MaxInboxPerSender)
			for i := range kps {
				kps[i] = kp
			}
			body := e.stockUpload(target, "laptop", 0, false)
			body["key_packages"] = kps
			if r := e.do("POST", "/v1/keypackages", target, body); r.status != 201 {
				b.Fatal(r)
			}
			b.StartTimer()
		}
		n++
		r := e.do("POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": targetID, "channel": ch})
		if r.status != 200 {
			b.Fatal(r)
		}
		id := r.body["claims"].([]any)[0].(map[string]any)["claim_id"].(string)
		if r := e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": id, "welcome": welcome}); r.status != 201 {
			b.Fatal(r)
		}
	}
}

// BenchmarkPutGroupInfo measures PUT /v1/channels/groupinfo of a 16 KiB
// GroupInfo at the epoch of the relay's fence (read from a relay in the
// process), what a member sends after each commit.
func BenchmarkPutGroupInfo(b *testing.B) { benchPutGroupInfo(b, "") }

// BenchmarkPutGroupInfoPostgres is BenchmarkPutGroupInfo on the tests'
// PostgreSQL server.
func BenchmarkPutGroupInfoPostgres(b *testing.B) { benchPutGroupInfo(b, postgresURL(b)) }

func benchPutGroupInfo(b *testing.B, database string) {
	e := newFencedEnv(b, func(c *Config) { c.Database = database }).env
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	gi := base64.StdEncoding.EncodeToString(make([]byte, 16<<10))
	const epoch = 0 // no commit yet
	for b.Loop() {
		if r := e.do("PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": epoch, "group_info": gi}); r.status != 200 {
			b.Fatal(r)
		}
	}
}

// BenchmarkAutoJoinProved measures POST /v1/channels/join by an auto
// invite with its proof of the identity's key, over loopback HTTP with an
// in-memory database: the proof's check (an Ed25519 verification and a
// read of the invite's kind) beside the join's transaction.
func BenchmarkAutoJoinProved(b *testing.B) {
	e := newEnv(b, nil)
	_, owner := e.account("acme")
	const ch = "acme/rooms/bench"
	e.channel(owner, ch)
	var keys []string
	for i := 0; i < 64; i++ {
		_, key := e.account(fmt.Sprintf("joiner%d", i))
		keys = append(keys, key)
	}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "auto": true})
		if r.status != 201 {
			b.Fatal(r)
		}
		key := keys[i%len(keys)]
		body := e.autoJoin(key, ch, r.str("token"), fmt.Sprint("bench ", i))
		i++
		b.StartTimer()
		if r := e.do("POST", "/v1/channels/join", key, body); r.status != 201 {
			b.Fatal(r)
		}
	}
}

// BenchmarkInviteJoinsPage measures the owner's read of a full page (500)
// of a channel's invite-join records, what its seat reads at most once
// every five minutes per room before lapsing any.
func BenchmarkInviteJoinsPage(b *testing.B) {
	e := newEnv(b, nil)
	_, owner := e.account("acme")
	joinerID, _ := e.account("globex")
	const ch = "acme/rooms/bench"
	e.channel(owner, ch)
	var chID string
	if err := e.queryRow(`SELECT id FROM channels WHERE name = ?`, ch).Scan(&chID); err != nil {
		b.Fatal(err)
	}
	for i := range maxInviteJoinsListed {
		if _, err := e.exec(`INSERT INTO channel_identities (channel_id, identity, account_id, added_at) VALUES (?, ?, ?, ?)`,
			chID, tid(fmt.Sprint("bench ", i)), joinerID, int64(1000+i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if r := e.do("GET", "/v1/channels/invite-joins?channel="+ch, owner, nil); r.status != 200 || len(r.body["joins"].([]any)) != maxInviteJoinsListed {
			b.Fatal(r)
		}
	}
}
