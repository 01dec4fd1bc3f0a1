package directory

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestContractTrees: the tree store on every backend: members only, a tree
// readable only once complete, parts immutable once stored, one uploader
// per tree, the per-channel count kept by evicting the oldest finished (or
// abandoned) tree, and the per-account quota, each refusal storing nothing.
func TestContractTrees(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := treeFixture(t, b)
		const ch = treeCh
		ok := func(_ treeState, err error) { t.Helper(); must(t, err) }

		// A stranger ("joiner" is no member yet) can neither put nor read.
		_, err := st.putTreePart(ctx, ch, "joiner", "t1", 0, 0, 0, 1, []byte("x"), t0)
		wantErr(t, err, errNotAMember)
		_, err = st.treeInfo(ctx, ch, "joiner", "t1")
		wantErr(t, err, errNotAMember)
		_, _, err = st.treePart(ctx, ch, "joiner", "t1", 0)
		wantErr(t, err, errNotAMember)
		_, err = st.putTreePart(ctx, "acme/no/such", "owner", "t1", 0, 0, 0, 1, []byte("x"), t0)
		wantErr(t, err, errChannelNotFound)

		// Parts in any order; the tree is not readable until the last.
		s, err := st.putTreePart(ctx, ch, "owner", "t1", 0, 0, 2, 3, []byte("cc"), t0)
		must(t, err)
		if s.received != 1 || s.complete() {
			t.Fatalf("after one part: %+v", s)
		}
		ok(st.putTreePart(ctx, ch, "owner", "t1", 0, 0, 0, 3, []byte("aaaa"), t0))
		_, _, err = st.treePart(ctx, ch, "member", "t1", 0)
		wantErr(t, err, errNotFound)
		// A retry of a stored part changes nothing; other bytes for it,
		// another count of parts, or another account are refused.
		s, err = st.putTreePart(ctx, ch, "owner", "t1", 0, 0, 0, 3, []byte("aaaa"), t0)
		if err != nil || s.received != 2 {
			t.Fatalf("a retry: %+v %v", s, err)
		}
		_, err = st.putTreePart(ctx, ch, "owner", "t1", 0, 0, 0, 3, []byte("evil"), t0)
		wantErr(t, err, errTreePartSet)
		_, err = st.putTreePart(ctx, ch, "owner", "t1", 0, 0, 1, 4, []byte("bbb"), t0)
		wantErr(t, err, errTreeMismatch)
		// Another account's tree of the same id is its own: it neither
		// blocks the owner's nor replaces what readers get.
		s, err = st.putTreePart(ctx, ch, "member", "t1", 0, 0, 0, 1, []byte("junk"), t0)
		if err != nil || !s.complete() || s.size != 4 {
			t.Fatalf("the member's own t1: %+v %v", s, err)
		}
		s, err = st.putTreePart(ctx, ch, "owner", "t1", 0, 0, 1, 3, []byte("bbb"), t0)
		if err != nil || !s.complete() || s.size != 9 {
			t.Fatalf("the last part: %+v %v", s, err)
		}
		var got []byte
		for i := range 3 {
			s, data, err := st.treePart(ctx, ch, "member", "t1", i)
			must(t, err)
			if s.parts != 3 || s.size != 9 {
				t.Fatalf("part %d: %+v", i, s)
			}
			got = append(got, data...)
		}
		if string(got) != "aaaabbbcc" {
			t.Fatalf("read back %q", got)
		}
		_, _, err = st.treePart(ctx, ch, "member", "t1", 3)
		wantErr(t, err, errNotFound)
		_, err = st.treeInfo(ctx, ch, "member", "t2")
		wantErr(t, err, errNotFound)

		// The channel keeps MaxTreesPerChannel trees: a new one evicts
		// the oldest complete one. Both t1 are complete (the member's goes
		// first, as the member holds the most); t2..t4 stay unfinished.
		for i := 2; i <= MaxTreesPerChannel; i++ {
			ok(st.putTreePart(ctx, ch, "member", "t"+strconv.Itoa(i), 0, 0, 0, 2, []byte("p"), t0))
		}
		ok(st.putTreePart(ctx, ch, "member", "t5", 0, 0, 0, 2, []byte("p"), t0))
		_, err = st.treeInfo(ctx, ch, "owner", "t1")
		wantErr(t, err, errNotFound)
		// Now every tree is being put: a sixth is refused, until the
		// oldest has been left unfinished past the upload window.
		_, err = st.putTreePart(ctx, ch, "owner", "t6", 0, 0, 0, 1, []byte("p"), t0)
		wantErr(t, err, errTooManyTrees)
		_, err = st.treeInfo(ctx, ch, "owner", "t6")
		wantErr(t, err, errNotFound)
		later := t0.Add(treeUploadWindow + time.Second)
		ok(st.putTreePart(ctx, ch, "owner", "t6", 0, 0, 0, 1, []byte("p"), later))
		_, err = st.treeInfo(ctx, ch, "owner", "t2")
		wantErr(t, err, errNotFound)
		if n := countTrees(t, st, "ch-1"); n != MaxTreesPerChannel {
			t.Fatalf("the channel holds %d trees", n)
		}

		// The sweep drops the trees left unfinished for a day.
		n, err := st.sweepTrees(ctx, t0.Add(treeSweepAge+time.Second))
		if err != nil || n != 3 {
			t.Fatalf("swept %d, %v", n, err)
		}
		_, err = st.treeInfo(ctx, ch, "owner", "t6")
		must(t, err)

		// The quota counts every tree an account has put, across channels.
		st.budgets.account = 10
		_, err = st.putTreePart(ctx, ch, "member", "q1", 0, 0, 0, 2, bytes.Repeat([]byte("q"), 11), later)
		wantErr(t, err, errQuota)
		_, err = st.treeInfo(ctx, ch, "member", "q1")
		wantErr(t, err, errNotFound)
		ok(st.putTreePart(ctx, ch, "member", "q1", 0, 0, 0, 2, bytes.Repeat([]byte("q"), 10), later))
		_, err = st.putTreePart(ctx, ch, "member", "q1", 0, 0, 1, 2, []byte("q"), later)
		wantErr(t, err, errQuota)

		// A member who left reads nothing any more.
		must(t, st.dropMember(ctx, ch, "member", "member", t0))
		_, _, err = st.treePart(ctx, ch, "member", "t6", 0)
		wantErr(t, err, errNotAMember)
	})
}

// treeCh is the channel of the tree contract tests, where "member" has
// been added by "owner".
const treeCh = "acme/a/b"

// treeFixture is fixture with "member" in treeCh.
func treeFixture(t *testing.T, b testBackend) (*store, context.Context) {
	t.Helper()
	st, ctx := fixture(t, b)
	must(t, st.createAccount(ctx, "member", "m@initech.example", "initech", nil, false, hashSecret("k-member"), t0))
	must(t, st.addMemberByOwner(ctx, treeCh, "owner", "member", t0))
	return st, ctx
}

// TestContractTreesHostileUploader: a member who puts tree after tree
// replaces its own and cannot push out the tree another member put (the
// tree a Welcome or GroupInfo names).
func TestContractTreesHostileUploader(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := treeFixture(t, b)
		const ch = treeCh
		put := func(who, id string) {
			t.Helper()
			_, err := st.putTreePart(ctx, ch, who, id, 0, 0, 0, 1, []byte(id), t0)
			must(t, err)
		}
		for i := range MaxTreesPerChannel {
			put("member", "junk-"+strconv.Itoa(i))
		}
		put("owner", "welcome")
		for i := MaxTreesPerChannel; i < 3*MaxTreesPerChannel; i++ {
			put("member", "junk-"+strconv.Itoa(i))
		}
		if _, err := st.treeInfo(ctx, ch, "member", "welcome"); err != nil {
			t.Fatalf("the owner's tree after the member's puts: %v", err)
		}
		if n := countTrees(t, st, "ch-1"); n != MaxTreesPerChannel {
			t.Fatalf("the channel holds %d trees", n)
		}
		// The member's newest is kept, its older ones are gone.
		if _, err := st.treeInfo(ctx, ch, "owner", "junk-"+strconv.Itoa(3*MaxTreesPerChannel-1)); err != nil {
			t.Fatal(err)
		}
		_, err := st.treeInfo(ctx, ch, "owner", "junk-0")
		wantErr(t, err, errNotFound)
	})
}

func countTrees(t *testing.T, st *store, chID string) int {
	t.Helper()
	var n int
	must(t, st.queryRow(t.Context(), `SELECT COUNT(*) FROM channel_trees WHERE channel_id = ?`, chID).Scan(&n))
	return n
}

// treePut is a PUT /v1/channels/tree body for epoch 0, the epoch of a
// channel that has had no commit.
func treePut(ch, id string, part, parts int, data []byte) map[string]any {
	return treePutAt(ch, id, 0, part, parts, data)
}

// treePutAt is a PUT /v1/channels/tree body for epoch.
func treePutAt(ch, id string, epoch uint64, part, parts int, data []byte) map[string]any {
	return map[string]any{"channel": ch, "id": id, "epoch": epoch, "part": part, "parts": parts, "data": base64.StdEncoding.EncodeToString(data)}
}

func treeGet(ch, id string, part int) string {
	p := "/v1/channels/tree?channel=" + url.QueryEscape(ch) + "&id=" + url.QueryEscape(id)
	if part >= 0 {
		p += "&part=" + strconv.Itoa(part)
	}
	return p
}

// TestTreeStrangersChangeNothing: every refusal of the tree endpoints, by
// a stranger, a scoped credential of another channel, or a member past a
// cap, has its exact answer and leaves the store as it was; a stranger
// gets what it gets for the channel's GroupInfo.
func TestTreeStrangersChangeNothing(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	_, stranger := e.account("hooli")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")
	r := e.do("POST", "/v1/seats", stranger, e.seatBody(stranger, "z6MkStranger", "hooli/seat/home"))
	want(t, r, 201, "")
	scoped := r.str("credential")
	want(t, e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "done", 0, 1, []byte("tree"))), 200, "")
	want(t, e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "half", 0, 2, []byte("half"))), 200, "")
	for i := 3; i <= MaxTreesPerChannel; i++ {
		want(t, e.do("PUT", "/v1/channels/tree", member, treePut(ch, "busy"+strconv.Itoa(i), 0, 2, []byte("b"))), 200, "")
	}
	e.s.store.budgets.account = 64
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxTreePart+1))

	type tc struct {
		name, method, path, auth string
		body                     any
		status                   int
		code                     string
	}
	cases := []tc{
		{"stranger put", "PUT", "/v1/channels/tree", stranger, treePut(ch, "x", 0, 1, []byte("x")), 403, "not_a_member"},
		{"stranger put to a tree", "PUT", "/v1/channels/tree", stranger, treePut(ch, "half", 1, 2, []byte("x")), 403, "not_a_member"},
		{"stranger get", "GET", treeGet(ch, "done", 0), stranger, nil, 403, "not_a_member"},
		{"stranger get of no tree", "GET", treeGet(ch, "nothing", 0), stranger, nil, 403, "not_a_member"},
		{"stranger info", "GET", treeGet(ch, "done", -1), stranger, nil, 403, "not_a_member"},
		{"no credential", "GET", treeGet(ch, "done", 0), "", nil, 401, "unauthorized"},
		{"scoped elsewhere put", "PUT", "/v1/channels/tree", scoped, treePut(ch, "x", 0, 1, []byte("x")), 403, "forbidden"},
		{"scoped elsewhere get", "GET", treeGet(ch, "done", 0), scoped, nil, 403, "forbidden"},
		{"unknown channel", "GET", treeGet("acme/no/such", "done", 0), owner, nil, 404, "channel_not_found"},
		{"bad channel", "PUT", "/v1/channels/tree", owner, treePut("acme/a b/c", "x", 0, 1, []byte("x")), 400, "invalid_channel"},
		{"incomplete", "GET", treeGet(ch, "half", 0), member, nil, 404, "not_found"},
		{"no such tree", "GET", treeGet(ch, "nothing", 0), member, nil, 404, "not_found"},
		{"no such part", "GET", treeGet(ch, "done", 1), member, nil, 404, "not_found"},
		{"part past the cap", "GET", treeGet(ch, "done", MaxTreeParts), member, nil, 400, "invalid_request"},
		{"negative part", "GET", treeGet(ch, "done", -1) + "&part=-1", member, nil, 400, "invalid_request"},
		{"part not a number", "GET", treeGet(ch, "done", -1) + "&part=x", member, nil, 400, "invalid_request"},
		{"bad id", "GET", treeGet(ch, "a/b", 0), member, nil, 400, "invalid_request"},
		{"long id", "PUT", "/v1/channels/tree", owner, treePut(ch, strings.Repeat("a", maxTreeID+1), 0, 1, []byte("x")), 400, "invalid_request"},
		{"empty id", "PUT", "/v1/channels/tree", owner, treePut(ch, "", 0, 1, []byte("x")), 400, "invalid_request"},
		{"no parts", "PUT", "/v1/channels/tree", owner, map[string]any{"channel": ch, "id": "x", "part": 0, "data": b64("x")}, 400, "invalid_request"},
		{"no part", "PUT", "/v1/channels/tree", owner, map[string]any{"channel": ch, "id": "x", "parts": 1, "data": b64("x")}, 400, "invalid_request"},
		{"zero parts", "PUT", "/v1/channels/tree", owner, treePut(ch, "x", 0, 0, []byte("x")), 413, "payload_too_large"},
		{"over 64 MiB", "PUT", "/v1/channels/tree", owner, treePut(ch, "x", 0, MaxTreeParts+1, []byte("x")), 413, "payload_too_large"},
		{"part past parts", "PUT", "/v1/channels/tree", owner, treePut(ch, "x", 2, 2, []byte("x")), 400, "invalid_request"},
		{"negative part put", "PUT", "/v1/channels/tree", owner, treePut(ch, "x", -1, 2, []byte("x")), 400, "invalid_request"},
		{"part over 1 MiB", "PUT", "/v1/channels/tree", owner, map[string]any{"channel": ch, "id": "x", "epoch": 0, "part": 0, "parts": 1, "data": big}, 413, "payload_too_large"},
		{"empty part", "PUT", "/v1/channels/tree", owner, treePut(ch, "x", 0, 1, nil), 400, "invalid_request"},
		{"bad base64", "PUT", "/v1/channels/tree", owner, map[string]any{"channel": ch, "id": "x", "epoch": 0, "part": 0, "parts": 1, "data": "YQ"}, 400, "invalid_base64"},
		{"other bytes for a part", "PUT", "/v1/channels/tree", owner, treePut(ch, "half", 0, 2, []byte("evil")), 409, "tree_part_conflict"},
		{"other part count", "PUT", "/v1/channels/tree", owner, treePut(ch, "half", 1, 3, []byte("x")), 409, "tree_mismatch"},
		{"an epoch the fence has not reached", "PUT", "/v1/channels/tree", member, treePutAt(ch, "x", 2, 0, 1, []byte("x")), 409, "epoch_not_reached"},
		{"the farthest epoch", "PUT", "/v1/channels/tree", member, treePutAt(ch, "x", 1<<63-1, 0, 1, []byte("x")), 409, "epoch_not_reached"},
		{"an epoch out of range", "PUT", "/v1/channels/tree", member, treePutAt(ch, "x", 1<<63, 0, 1, []byte("x")), 400, "invalid_request"},
		{"no epoch", "PUT", "/v1/channels/tree", owner, map[string]any{"channel": ch, "id": "x", "part": 0, "parts": 1, "data": "eA=="}, 400, "invalid_request"},
		{"over the quota", "PUT", "/v1/channels/tree", owner, treePut(ch, "half", 1, 2, make([]byte, 61)), 413, "quota_exceeded"},
	}
	before := e.snapshot()
	for _, c := range cases {
		r := e.do(c.method, c.path, c.auth, c.body)
		if r.status != c.status || r.code() != c.code {
			t.Errorf("%s: got %s, want %d %q", c.name, r, c.status, c.code)
		}
		if c.status >= 400 && r.str("message") == "" {
			t.Errorf("%s: no message", c.name)
		}
		if after := e.snapshot(); after != before {
			t.Errorf("%s: the store changed", c.name)
			before = after
		}
	}

	// The channel holds four trees, three still being put: the fourth
	// finished one makes room for a new tree, and then a fifth is
	// refused with a Retry-After.
	want(t, e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "new", 0, 1, []byte("n"))), 200, "")
	want(t, e.do("GET", treeGet(ch, "done", -1), member, nil), 404, "not_found")
	// "new" is complete, so it gives way to the next; once the channel
	// holds only trees still being put, one more is refused.
	want(t, e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "one-more", 0, 2, []byte("n"))), 200, "")
	before = e.snapshot()
	r = e.do("PUT", "/v1/channels/tree", member, treePut(ch, "busy9", 0, 2, []byte("n")))
	want(t, r, 429, "too_many_trees")
	if r.header.Get("Retry-After") == "" {
		t.Error("too_many_trees without Retry-After")
	}
	if e.snapshot() != before {
		t.Error("a refused tree changed the store")
	}
}

// TestTreeRoundTrip: a tree of several full parts goes in and comes back
// byte for byte to a member who joined by Welcome (the inbox makes it a
// member) but not to one removed.
func TestTreeRoundTrip(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		db := b.database(t)
		e := newFencedEnv(t, func(c *Config) { c.Database = db })
		_, owner := e.account("acme")
		memberID, member := e.account("globex")
		const ch = "acme/pay/room"
		e.channel(owner, ch)
		want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")
		tree := make([]byte, 2*MaxTreePart+12345)
		for i := range tree {
			tree[i] = byte(i * 7)
		}
		parts := (len(tree) + MaxTreePart - 1) / MaxTreePart
		for i := range parts {
			end := min((i+1)*MaxTreePart, len(tree))
			r := e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "abc123", i, parts, tree[i*MaxTreePart:end]))
			want(t, r, 200, "")
			if done := r.body["complete"] == true; done != (i == parts-1) {
				t.Fatalf("part %d: %s", i, r)
			}
		}
		r := e.do("GET", treeGet(ch, "abc123", -1), member, nil)
		want(t, r, 200, "")
		if r.body["size"] != float64(len(tree)) || r.body["parts"] != float64(parts) || r.body["complete"] != true {
			t.Fatalf("info %s", r)
		}
		var got []byte
		for i := range parts {
			r := e.do("GET", treeGet(ch, "abc123", i), member, nil)
			want(t, r, 200, "")
			d, err := base64.StdEncoding.DecodeString(r.str("data"))
			must(t, err)
			got = append(got, d...)
		}
		if !bytes.Equal(got, tree) {
			t.Fatal("the tree came back changed")
		}
		want(t, e.do("DELETE", "/v1/channels/members?channel="+url.QueryEscape(ch)+"&account_id="+memberID, owner, nil), 200, "")
		want(t, e.do("GET", treeGet(ch, "abc123", 0), member, nil), 403, "not_a_member")
	})
}

// TestTreeRateLimited: puts of tree parts take from their own buckets.
func TestTreeRateLimited(t *testing.T) {
	e := newFencedEnv(t, func(c *Config) {
		c.Limits = Limits{Tree: Rate{PerAccount: Bucket{Burst: 2, Every: time.Hour}}}
	})
	_, owner := e.account("acme")
	const ch = "acme/pay/room"
	e.channel(owner, ch)
	want(t, e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "t", 0, 3, []byte("a"))), 200, "")
	want(t, e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "t", 1, 3, []byte("b"))), 200, "")
	before := e.snapshot()
	r := e.do("PUT", "/v1/channels/tree", owner, treePut(ch, "t", 2, 3, []byte("c")))
	want(t, r, 429, "rate_limited")
	if e.snapshot() != before {
		t.Fatal("a refused put stored something")
	}
	// Reads are not limited by the bucket of puts.
	want(t, e.do("GET", treeGet(ch, "t", -1), owner, nil), 200, "")
}

// FuzzPutTree sends arbitrary bodies to PUT /v1/channels/tree: the answer
// is never a 500, and a refusal stores nothing.
func FuzzPutTree(f *testing.F) {
	e := newFencedEnv(f, nil)
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	for _, seed := range []string{
		`{"channel":"acme/pay/agent","id":"ab","part":0,"parts":1,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"ab","epoch":0,"part":0,"parts":1,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"ab","epoch":1,"part":1,"parts":2,"data":"AAEC"}`,
		`{"channel":"acme/pay/agent","id":"ab","epoch":2,"part":0,"parts":1,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"ab","epoch":18446744073709551615,"part":0,"parts":1,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"ab","epoch":-1,"part":0,"parts":1,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"ab","part":1,"parts":2,"data":"AAEC"}`,
		`{"channel":"acme/pay/agent","id":"ab","part":-1,"parts":99999999999,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"a\u0000b","part":0,"parts":1,"data":"AA=="}`,
		`{"channel":"acme/pay/agent","id":"ab","part":0.5,"parts":1,"data":"AA=="}`,
		``, `[]`, `{"a":`, "\x00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before := snapshotDB(t, e.s)
		req := httptest.NewRequest("PUT", "/v1/channels/tree", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+owner)
		w := httptest.NewRecorder()
		e.s.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%d for %q: %s", w.Code, body, w.Body)
		}
		if w.Code >= 400 && snapshotDB(t, e.s) != before {
			t.Fatalf("%d for %q, and the store changed", w.Code, body)
		}
	})
}

// BenchmarkTreeRoundTrip puts a ratchet tree of 26 parts (the 26.3 MB
// tree of a full 10,000-member room in suite 0x004D) and reads it back,
// over HTTP on loopback; a new id each time.
func BenchmarkTreeRoundTrip(b *testing.B) { benchTreeRoundTrip(b, "") }

// BenchmarkTreeRoundTripPostgres is BenchmarkTreeRoundTrip on the tests'
// PostgreSQL server.
func BenchmarkTreeRoundTripPostgres(b *testing.B) { benchTreeRoundTrip(b, postgresURL(b)) }

func benchTreeRoundTrip(b *testing.B, database string) {
	e := newFencedEnv(b, func(c *Config) { c.Database = database })
	_, owner := e.account("acme")
	const ch = "acme/pay/room"
	e.channel(owner, ch)
	const parts = 26
	part := make([]byte, MaxTreePart)
	for i := range part {
		part[i] = byte(i)
	}
	body := func(id string, i int) map[string]any {
		return treePut(ch, id, i, parts, append(part[:len(part)-8:len(part)-8], byte(i)))
	}
	n := 0
	for b.Loop() {
		n++
		id := "t" + strconv.Itoa(n)
		for i := range parts {
			if r := e.do("PUT", "/v1/channels/tree", owner, body(id, i)); r.status != 200 {
				b.Fatal(r)
			}
		}
		for i := range parts {
			if r := e.do("GET", treeGet(ch, id, i), owner, nil); r.status != 200 {
				b.Fatal(r)
			}
		}
	}
	b.SetBytes(parts * (MaxTreePart - 7))
}

// TestTreeFollowsTheFence: a tree is put for the epoch the relay's commit
// fence has reached or the next (a Welcome's), nothing else; a member who
// puts its own bytes under the id the owner will use, first, blocks
// neither the owner's put nor what a joiner reads once the owner's
// GroupInfo names it; and trees a member left unfinished for epochs the
// fence has passed make room for new ones at once. Before, the epoch was
// not asked for, the first account to put an id held it (409 tree_taken)
// and a member's unfinished trees held the channel's slots for the upload
// window.
func TestTreeFollowsTheFence(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		db := b.database(t)
		e := newFencedEnv(t, func(c *Config) { c.Database = db })
		_, owner := e.account("acme")
		memberID, member := e.account("globex")
		const ch = "acme/pay/room"
		e.channel(owner, ch)
		want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")
		e.setFence(owner, ch, 3)

		before := e.snapshot()
		r := e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "far", 5, 0, 1, []byte("x")))
		want(t, r, 409, "epoch_not_reached")
		if r.body["epoch"] != float64(3) {
			t.Fatalf("the fence's epoch: %s", r)
		}
		want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "far", 1<<62, 0, 1, []byte("x"))), 409, "epoch_not_reached")
		want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "old", 2, 0, 1, []byte("x"))), 409, "stale_epoch")
		if e.snapshot() != before {
			t.Fatal("a refused tree stored something")
		}

		// The member squats the id of the owner's tree with a complete
		// tree of its own and one of the next epoch's with a part.
		const id = "c0ffee"
		want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, id, 3, 0, 1, []byte("junk"))), 200, "")
		want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "next", 4, 0, 2, []byte("junk"))), 200, "")
		honest := []string{"honest-part-0", "honest-1"}
		for i, p := range honest {
			r := e.do("PUT", "/v1/channels/tree", owner, treePutAt(ch, id, 3, i, 2, []byte(p)))
			want(t, r, 200, "")
			if r.body["complete"] != (i == 1) || r.body["received"] != float64(i+1) {
				t.Fatalf("the owner's part %d: %s", i, r)
			}
		}
		want(t, e.do("PUT", "/v1/channels/tree", owner, treePutAt(ch, "next", 4, 0, 1, []byte("welcome tree"))), 200, "")
		want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 3, "owner's gi 3")), 200, "")
		for i, p := range honest {
			r := e.do("GET", treeGet(ch, id, i), member, nil)
			want(t, r, 200, "")
			if d, _ := base64.StdEncoding.DecodeString(r.str("data")); string(d) != p || r.body["parts"] != float64(2) {
				t.Fatalf("part %d read back: %s", i, r)
			}
		}
		// The member's unfinished tree is not what a reader gets either.
		r = e.do("GET", treeGet(ch, "next", 0), member, nil)
		want(t, r, 200, "")
		if d, _ := base64.StdEncoding.DecodeString(r.str("data")); string(d) != "welcome tree" {
			t.Fatalf("the Welcome's tree read back: %s", r)
		}

		// A fence reset clears what the GroupInfo's putter put (the
		// owner's trees); the member's unfinished trees of epoch 4 stay.
		// With the owner's two new trees the channel's slots are full:
		// the member's trees of an epoch the fence has passed go first,
		// though their upload window has not ended, and the owner's
		// finished trees of the current epoch are kept.
		want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "more", 4, 0, 2, []byte("junk"))), 200, "")
		e.setFence(owner, ch, 6)
		want(t, e.do("PUT", "/v1/channels/tree", owner, treePutAt(ch, "six", 6, 0, 1, []byte("six"))), 200, "")
		want(t, e.do("PUT", "/v1/channels/tree", owner, treePutAt(ch, "seven", 7, 0, 1, []byte("seven"))), 200, "")
		want(t, e.do("PUT", "/v1/channels/tree", owner, treePutAt(ch, "eight", 7, 0, 1, []byte("eight"))), 200, "")
		for _, id := range []string{"six", "seven", "eight"} {
			want(t, e.do("GET", treeGet(ch, id, 0), member, nil), 200, "")
		}
		want(t, e.do("GET", treeGet(ch, "next", -1), member, nil), 404, "not_found")
	})
}
