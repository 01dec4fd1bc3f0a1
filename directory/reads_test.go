package directory

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadsBoundedPerAccount: with its ReadsPerAccount reads in flight,
// one more read of the same account waits, then gets 429 rate_limited
// with a Retry-After and changes nothing; another account's reads are
// served meanwhile; once a read ends the account is served again.
func TestReadsBoundedPerAccount(t *testing.T) {
	e := newEnv(t, nil)
	crowdID, crowd := e.account("acme")
	_, honest := e.account("globex")
	var held []func()
	for range DefaultLimits.ReadsPerAccount {
		release, refused := e.s.reads.acquire(crowdID, 0)
		if refused != "" {
			t.Fatalf("slot refused by the %s bound", refused)
		}
		held = append(held, release)
	}
	for _, path := range []string{"/v1/inbox", "/v1/keypackages", "/v1/contacts/tokens"} {
		r := e.do("GET", path, crowd, nil)
		want(t, r, 429, "rate_limited")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: 429 without Retry-After", path)
		}
		want(t, e.do("GET", path, honest, nil), 200, "")
	}
	held[0]()
	want(t, e.do("GET", "/v1/inbox", crowd, nil), 200, "")
	for _, release := range held[1:] {
		release()
	}
	if e.s.reads.accounts[crowdID] != nil || len(e.s.reads.accounts) != 0 {
		t.Fatalf("the gate still tracks %d accounts", len(e.s.reads.accounts))
	}
}

// TestReadsBoundedServerWide: with the server's ReadBytes of answers in
// flight (here two pages' worth, for two accounts), a third account's read
// gets 429 rate_limited; it is served once one ends.
func TestReadsBoundedServerWide(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Limits.ReadBytes = 2 * maxAnswerBytes })
	aID, _ := e.account("acme")
	bID, _ := e.account("globex")
	_, third := e.account("hooli")
	ra, _ := e.s.reads.acquire(aID, 0)
	rb, refused := e.s.reads.acquire(bID, 0)
	if refused != "" {
		t.Fatalf("second slot refused by the %s bound", refused)
	}
	want(t, e.do("GET", "/v1/inbox", third, nil), 429, "rate_limited")
	ra()
	want(t, e.do("GET", "/v1/inbox", third, nil), 200, "")
	rb()
}

// TestReadsRateLimited: the read GETs have token buckets of their own
// (Limits.Read): past the burst an account gets 429 with a Retry-After.
func TestReadsRateLimited(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{Read: Rate{PerAccount: Bucket{Burst: 3, Every: time.Hour}}}
	})
	_, key := e.account("acme")
	for range 3 {
		want(t, e.do("GET", "/v1/inbox", key, nil), 200, "")
	}
	r := e.do("GET", "/v1/channels/members?channel=acme/a/b", key, nil)
	want(t, r, 429, "rate_limited")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
}

// TestReadsConcurrentHeapBounded: eight readers each of three accounts
// whose inboxes are one maximal page (4 MiB of Welcomes) read them at
// once, against a directory allowing 2 reads per account and 2 pages'
// worth in all. No more reads than the bounds are ever in flight, every
// read is either the whole page or 429 rate_limited, and the heap grows by
// no more than the in-flight pages allow (each page costs a few copies of
// its bytes: the rows, base64, the JSON), generously counted.
func TestReadsConcurrentHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("fills three inboxes with 12 MiB of Welcomes")
	}
	const perAccount, slots = 2, 2
	e := newEnv(t, func(c *Config) {
		c.Limits.ReadsPerAccount = perAccount
		c.Limits.ReadBytes = slots * maxAnswerBytes
	})
	var targets []string
	for i := range 3 {
		id, key := e.account(fmt.Sprint("target", i))
		want(t, e.do("POST", "/v1/keypackages", key, e.stockUpload(key, "laptop", 0, true)), 201, "")
		for j := range 2 {
			org := fmt.Sprintf("sender%d-%d", i, j)
			_, s := e.account(org)
			e.channel(s, org+"/a/b")
			e.relate(key, s)
			for range MaxInboxSenderBytes / MaxWelcome {
				want(t, e.deliverTo(s, id, org+"/a/b", MaxWelcome), 201, "")
			}
		}
		targets = append(targets, key)
	}
	pages := map[string]int64{}
	page := 0
	for _, key := range targets {
		r := e.do("GET", "/v1/inbox", key, nil)
		if len(r.raw) < maxAnswerBytes || r.body["has_more"] != false {
			t.Fatalf("a page of %d bytes is not the whole maximal inbox", len(r.raw))
		}
		pages[key], page = int64(len(r.raw)), max(page, len(r.raw))
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	for _, key := range targets {
		for range 8 {
			wg.Go(func() {
				for range 3 {
					req, _ := http.NewRequest("GET", e.ts.URL+"/v1/inbox", nil)
					req.Header.Set("Authorization", "Bearer "+key)
					resp, err := e.ts.Client().Do(req)
					if err != nil {
						t.Log(err)
						other.Add(1)
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch {
					case resp.StatusCode == 200 && n == pages[key]:
						ok.Add(1)
					case resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "":
						refused.Add(1)
					default:
						t.Logf("answer %d of %d bytes", resp.StatusCode, n)
						other.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	<-sampled
	if other.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("%d whole pages, %d refused, %d other answers", ok.Load(), refused.Load(), other.Load())
	}
	acct, total := e.s.reads.peaks()
	growth := int64(peak.Load()) - int64(before.HeapInuse)
	bound := int64(slots*8*page + 32<<20)
	t.Logf("%d whole pages, %d refused; heap in use grew by %d MiB at most (bound %d MiB)", ok.Load(), refused.Load(), growth>>20, bound>>20)
	if growth > bound {
		t.Fatalf("heap in use grew by %d bytes with %d reads in flight at most; bound %d", growth, total, bound)
	}
	if acct > perAccount || total > slots {
		t.Fatalf("%d reads of one account and %d in all were in flight; the bounds are %d and %d", acct, total, perAccount, slots)
	}
}

// TestMembersPaged: a channel of 1200 members is listed in pages of at
// most maxMembersListed, each with has_more and the cursor of the next,
// every member once and in order; a bad cursor is 400 and a stranger
// reads nothing.
func TestMembersPaged(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		ctx := t.Context()
		chID, _, err := channelOwner(ctx, e.s.store, ch)
		if err != nil {
			t.Fatal(err)
		}
		// Many members added in the same nanosecond, so the cursor's
		// tie-break on the account id is exercised.
		now := e.clock.Now()
		var ids []string
		if err := e.s.store.write(ctx, func(tx txn) error {
			for i := range 1200 {
				id := fmt.Sprintf("m%04d", i)
				if _, err := tx.exec(ctx, `INSERT INTO accounts (id, org, email, created_at) VALUES (?, 'acme', 'm@example.com', ?)`, id, now.UnixNano()); err != nil {
					return err
				}
				if _, err := addMember(ctx, tx, chID, ch, id, now.Add(time.Duration(1+i/7)*time.Microsecond)); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			r := e.do("GET", "/v1/channels/members?channel="+ch+"&after="+after, owner, nil)
			want(t, r, 200, "")
			ms := r.body["members"].([]any)
			if len(ms) == 0 || len(ms) > maxMembersListed {
				t.Fatalf("page %d: %d members", pages, len(ms))
			}
			for _, m := range ms {
				got = append(got, m.(map[string]any)["account_id"].(string))
			}
			if r.body["has_more"] != true {
				break
			}
			after = r.str("next")
			if pages > 10 {
				t.Fatal("the pages do not end")
			}
		}
		if fmt.Sprint(got[1:]) != fmt.Sprint(ids) {
			t.Fatalf("read %d members, want the owner and the %d in order", len(got), len(ids))
		}
		for _, bad := range []string{"x", "1:", ":m1", "-1:m1"} {
			want(t, e.do("GET", "/v1/channels/members?channel="+ch+"&after="+bad, owner, nil), 400, "invalid_request")
		}
		_, stranger := e.account("globex")
		want(t, e.do("GET", "/v1/channels/members?channel="+ch, stranger, nil), 403, "not_member")
	})
}

// TestStockClaimsPaged: 250 claims on an account's stock are read in
// pages of at most maxClaimsListed, each with has_more and the cursor of
// the next, every claim once and in order.
func TestStockClaimsPaged(t *testing.T) {
	e := newEnv(t, nil)
	targetID, target := e.account("globex")
	_, claimer := e.account("hooli")
	const ch = "hooli/pay/agent"
	e.channel(claimer, ch)
	e.relate(target, claimer)
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 0, true)), 201, "")
	var ids []string
	for range 250 {
		ids = append(ids, e.claim(claimer, targetID, ch)...)
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		r := e.do("GET", "/v1/keypackages?after="+after, target, nil)
		want(t, r, 200, "")
		cs := r.body["claims"].([]any)
		if len(cs) == 0 || len(cs) > maxClaimsListed || len(r.body["devices"].([]any)) != 1 {
			t.Fatalf("page %d: %s", pages, r)
		}
		for _, c := range cs {
			got = append(got, c.(map[string]any)["id"].(string))
		}
		if r.body["has_more"] != true {
			break
		}
		after = r.str("next")
		if _, err := strconv.ParseInt(after, 10, 64); err != nil || pages > 10 {
			t.Fatalf("page %d: next %q", pages, after)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("read %d claims, want the %d in order", len(got), len(ids))
	}
	want(t, e.do("GET", "/v1/keypackages?after=x", target, nil), 400, "invalid_request")
}
