package directory

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// BenchmarkMintToken measures POST /v1/tokens over loopback HTTP: API key
// lookup, revocation check and HS256 signing.
func BenchmarkMintToken(b *testing.B) {
	e := newEnv(b, nil)
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

func benchJoinAdmit(b *testing.B, path string) {
	e := newEnv(b, func(c *Config) { c.DBPath = path })
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
