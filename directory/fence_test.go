package directory

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay"
)

// A GroupInfo follows the relay's commit fence: these tests run the
// directory with a real relay beside it, following the directory's feeds
// as in a stack, and move the fence the way an owner does, with
// POST /v1/channels/fence.

// lateFence is the fence of a relay started after the directory (the
// relay follows the directory's feeds, so it comes second), as
// skytale.NewStack wires it.
type lateFence struct{ r atomic.Pointer[relay.Server] }

func (f *lateFence) NextEpoch(ctx context.Context, ch string) (uint64, bool, error) {
	return f.r.Load().NextEpoch(ctx, ch)
}

// fencedEnv is a directory with a relay whose commit fence it reads.
type fencedEnv struct {
	*env
	relay    *relay.Server
	relayURL string
}

func newFencedEnv(t testing.TB, mod func(*Config)) *fencedEnv {
	t.Helper()
	lf := &lateFence{}
	e := newEnv(t, func(c *Config) {
		c.Fence = lf
		if mod != nil {
			mod(c)
		}
	})
	r, err := relay.New(context.Background(), relay.Config{
		JWTSecret:      testJWTSecret,
		InternalSecret: []byte(testInternalSecret),
		Members:        e.s,
		Revocations:    e.s,
		MembersPoll:    20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	lf.r.Store(r)
	ts := httptest.NewServer(r)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ts.CloseClientConnections()
		if err := r.Close(ctx); err != nil {
			t.Errorf("relay close: %v", err)
		}
		ts.Close()
	})
	return &fencedEnv{env: e, relay: r, relayURL: ts.URL}
}

// setFence has the owner reset the channel's commit fence to epoch and
// waits until the relay applied it.
func (e *fencedEnv) setFence(owner, ch string, epoch uint64) {
	e.t.Helper()
	want(e.t, e.do("POST", "/v1/channels/fence", owner, map[string]any{"channel": ch, "epoch": epoch}), 200, "")
	waitfor.Nil(e.t, 10*time.Second, func() error {
		got, known, err := e.relay.NextEpoch(context.Background(), ch)
		if err == nil && known && got == epoch {
			return nil
		}
		return fmt.Errorf("the relay's fence of %s is %d (known %v, %v), want %d", ch, got, known, err, epoch)
	})
}

func putGI(ch string, epoch uint64, data string) map[string]any {
	return map[string]any{"channel": ch, "epoch": epoch, "group_info": b64(data)}
}

// getGI returns the channel's GroupInfo as the owner reads it ("" and 0
// for none).
func (e *fencedEnv) getGI(key, ch string) (string, uint64) {
	e.t.Helper()
	r := e.do("GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(ch), key, nil)
	if r.status == 404 {
		return "", 0
	}
	want(e.t, r, 200, "")
	epoch, _ := r.body["epoch"].(float64)
	return r.str("group_info"), uint64(epoch)
}

// TestGroupInfoFarEpoch: a member's GroupInfo of an epoch the relay's
// fence has not reached (2^63-1, or just the next one) is refused and
// stores nothing, so the owner's honest put at the fence's epoch is
// accepted; before, the far epoch was kept and refused every later put as
// stale for good.
func TestGroupInfoFarEpoch(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")

	// No commit yet: the group is at its creation's epoch, 0.
	for _, epoch := range []uint64{math.MaxInt64, 1} {
		r := e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, epoch, "jam"))
		want(t, r, 409, "epoch_not_reached")
		if r.body["epoch"] != float64(0) {
			t.Fatalf("epoch %d: the refusal names %v, want the fence's 0", epoch, r.body["epoch"])
		}
	}
	if gi, _ := e.getGI(owner, ch); gi != "" {
		t.Fatalf("a refused GroupInfo is kept: %q", gi)
	}
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 0, "gi 0")), 200, "")

	e.setFence(owner, ch, 3)
	before := e.snapshot()
	for _, epoch := range []uint64{math.MaxInt64, 1 << 32, 4} {
		r := e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, epoch, "jam"))
		want(t, r, 409, "epoch_not_reached")
		if r.body["epoch"] != float64(3) {
			t.Fatalf("epoch %d: the refusal names %v, want 3", epoch, r.body["epoch"])
		}
	}
	r := e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, 2, "old"))
	want(t, r, 409, "stale_epoch")
	if r.body["epoch"] != float64(3) {
		t.Fatalf("stale: the refusal names %v, want 3", r.body["epoch"])
	}
	if e.snapshot() != before {
		t.Fatal("a refused GroupInfo changed the store")
	}
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 3, "gi 3")), 200, "")
	if gi, epoch := e.getGI(member, ch); gi != b64("gi 3") || epoch != 3 {
		t.Fatalf("kept %q at %d, want the owner's of epoch 3", gi, epoch)
	}
	// A member's put at the fence's epoch is as good as the owner's.
	want(t, e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, 3, "gi 3 again")), 200, "")
}

// TestGroupInfoRemovedMember: what a member put (its GroupInfo at the
// right epoch, its trees) is gone with its membership, the owner's next
// honest put is accepted, and the removed member's own puts are refused
// like a stranger's.
func TestGroupInfoRemovedMember(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	otherID, other := e.account("initech")
	_, stranger := e.account("hooli")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	for _, id := range []string{memberID, otherID} {
		want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": id}), 200, "")
	}
	e.setFence(owner, ch, 5)
	want(t, e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, 5, "member's gi 5")), 200, "")
	want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "mtree", 5, 0, 1, []byte("member's tree"))), 200, "")
	want(t, e.do("PUT", "/v1/channels/tree", other, treePutAt(ch, "otree", 5, 0, 1, []byte("other's tree"))), 200, "")

	want(t, e.do("DELETE", "/v1/channels/members?channel="+url.QueryEscape(ch)+"&account_id="+memberID, owner, nil), 200, "")
	if gi, _ := e.getGI(owner, ch); gi != "" {
		t.Fatalf("the removed member's GroupInfo is still handed out: %q", gi)
	}
	want(t, e.do("GET", "/v1/channels/tree?channel="+url.QueryEscape(ch)+"&id=mtree", owner, nil), 404, "not_found")
	want(t, e.do("GET", "/v1/channels/tree?channel="+url.QueryEscape(ch)+"&id=otree&part=0", owner, nil), 200, "")

	for name, key := range map[string]string{"removed member": member, "stranger": stranger} {
		want(t, e.do("PUT", "/v1/channels/groupinfo", key, putGI(ch, 5, "again")), 403, "not_a_member")
		want(t, e.do("PUT", "/v1/channels/groupinfo", key, putGI(ch, math.MaxInt64, "jam")), 403, "not_a_member")
		want(t, e.do("PUT", "/v1/channels/tree", key, treePut(ch, "again", 0, 1, []byte("x"))), 403, "not_a_member")
		if gi, _ := e.getGI(owner, ch); gi != "" {
			t.Fatalf("%s: a GroupInfo is kept: %q", name, gi)
		}
	}
	want(t, e.do("PUT", "/v1/channels/groupinfo", "", putGI(ch, 5, "anon")), 401, "unauthorized")
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI("acme/no/such", 0, "x")), 404, "channel_not_found")
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 5, "owner's gi 5")), 200, "")
	if gi, epoch := e.getGI(other, ch); gi != b64("owner's gi 5") || epoch != 5 {
		t.Fatalf("kept %q at %d, want the owner's of epoch 5", gi, epoch)
	}

	// A member leaving on its own takes its GroupInfo with it too.
	want(t, e.do("PUT", "/v1/channels/groupinfo", other, putGI(ch, 5, "other's gi 5")), 200, "")
	want(t, e.do("DELETE", "/v1/channels/members?channel="+url.QueryEscape(ch)+"&account_id="+otherID, other, nil), 200, "")
	if gi, _ := e.getGI(owner, ch); gi != "" {
		t.Fatalf("a member who left still has its GroupInfo handed out: %q", gi)
	}
}

// TestGroupInfoFenceReset: a fence reset clears a GroupInfo of another
// epoch (and its putter's trees), keeps one of the reset's epoch, and the
// owner's put at the new fence is accepted.
func TestGroupInfoFenceReset(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")
	e.setFence(owner, ch, 9)
	want(t, e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, 9, "member's gi 9")), 200, "")
	want(t, e.do("PUT", "/v1/channels/tree", member, treePutAt(ch, "mtree", 9, 0, 1, []byte("member's tree"))), 200, "")

	e.setFence(owner, ch, 4)
	if gi, _ := e.getGI(owner, ch); gi != "" {
		t.Fatalf("a GroupInfo of epoch 9 outlived the reset to 4: %q", gi)
	}
	want(t, e.do("GET", "/v1/channels/tree?channel="+url.QueryEscape(ch)+"&id=mtree", owner, nil), 404, "not_found")
	want(t, e.do("PUT", "/v1/channels/groupinfo", member, putGI(ch, 9, "again")), 409, "epoch_not_reached")
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 4, "owner's gi 4")), 200, "")

	// A reset to the epoch kept keeps it.
	e.setFence(owner, ch, 4)
	if gi, epoch := e.getGI(member, ch); gi != b64("owner's gi 4") || epoch != 4 {
		t.Fatalf("kept %q at %d after a reset to its own epoch", gi, epoch)
	}
}

// TestGroupInfoQuota: GroupInfo bytes count with tree bytes against one
// per-account budget: an account putting GroupInfos in many channels
// stops at it (413 quota_exceeded, scope account) and stores nothing
// more; replacing its own GroupInfo is not counted twice, and what
// another account replaces or a removal clears is given back.
func TestGroupInfoQuota(t *testing.T) {
	e := newFencedEnv(t, nil)
	e.s.store.budgets.account = 3000
	_, owner := e.account("acme")
	hogID, hog := e.account("globex")
	var chans []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		ch := "acme/rooms/" + n
		e.channel(owner, ch)
		want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": hogID}), 200, "")
		chans = append(chans, ch)
	}
	kb := strings.Repeat("g", 1000)
	for _, ch := range chans[:3] {
		want(t, e.do("PUT", "/v1/channels/groupinfo", hog, putGI(ch, 0, kb)), 200, "")
	}
	before := e.snapshot()
	r := e.do("PUT", "/v1/channels/groupinfo", hog, putGI(chans[3], 0, kb))
	want(t, r, 413, "quota_exceeded")
	if r.str("scope") != "account" || r.str("message") == "" {
		t.Fatalf("quota refusal %s: want scope account and a message", r)
	}
	want(t, e.do("PUT", "/v1/channels/tree", hog, treePut(chans[3], "t", 0, 1, []byte("x"))), 413, "quota_exceeded")
	if e.snapshot() != before {
		t.Fatal("a put over the quota changed the store")
	}
	// Its own GroupInfo replaced in place is counted once.
	want(t, e.do("PUT", "/v1/channels/groupinfo", hog, putGI(chans[0], 0, kb)), 200, "")
	// The owner replacing one gives its bytes back to the hog.
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(chans[0], 0, "owner's")), 200, "")
	want(t, e.do("PUT", "/v1/channels/groupinfo", hog, putGI(chans[3], 0, kb)), 200, "")
	want(t, e.do("PUT", "/v1/channels/groupinfo", hog, putGI(chans[4], 0, kb)), 413, "quota_exceeded")
	// Leaving a channel clears what it put there.
	want(t, e.do("DELETE", "/v1/channels/members?channel="+url.QueryEscape(chans[1])+"&account_id="+hogID, hog, nil), 200, "")
	want(t, e.do("PUT", "/v1/channels/groupinfo", hog, putGI(chans[4], 0, kb)), 200, "")
	// The owner's budget is its own.
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(chans[1], 0, kb)), 200, "")
}

// TestGroupInfoWithoutFence: a directory with no fence source keeps no
// GroupInfo at all, rather than any epoch a member names.
func TestGroupInfoWithoutFence(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	before := e.snapshot()
	for _, epoch := range []uint64{0, 1, math.MaxInt64} {
		r := e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, epoch, "gi"))
		want(t, r, 503, "fence_unavailable")
		if r.str("message") == "" {
			t.Fatal("no message")
		}
	}
	if e.snapshot() != before {
		t.Fatal("the store changed")
	}
}

// TestGroupInfoHTTPFence: a directory apart from its relay reads the
// fence over the relay's internal endpoint; with the wrong secret it
// cannot, and keeps nothing.
func TestGroupInfoHTTPFence(t *testing.T) {
	fe := newFencedEnv(t, nil)
	const ch = "acme/pay/agent"
	// The relay learns the fence of ch from fe's feed.
	_, fowner := fe.account("acme")
	fe.channel(fowner, ch)
	fe.setFence(fowner, ch, 7)
	for _, tc := range []struct {
		secret string
		status int
		code   string
	}{
		{testInternalSecret, 200, ""},
		{"not-the-internal-secret-0123456", 503, "fence_unavailable"},
	} {
		e := newEnv(t, func(c *Config) { c.Fence = NewHTTPFence(fe.relayURL, tc.secret, nil) })
		_, owner := e.account("acme")
		e.channel(owner, ch)
		want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 7, "gi 7")), tc.status, tc.code)
		if tc.status == 200 {
			want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 8, "gi 8")), 409, "epoch_not_reached")
			want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 6, "gi 6")), 409, "stale_epoch")
		}
	}
}

// TestGroupInfoLegacyJam: a GroupInfo kept at a far epoch before the
// fence was checked (as the highest-epoch rule let a member do) does not
// refuse the owner's put at the fence's epoch, which replaces it.
func TestGroupInfoLegacyJam(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, _ := e.account("globex")
	const ch = "acme/pay/agent"
	chID := e.channel(owner, ch)
	want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")
	e.setFence(owner, ch, 2)
	err := e.s.store.write(context.Background(), func(tx txn) error {
		_, err := tx.exec(context.Background(),
			`INSERT INTO group_infos (channel_id, epoch, group_info, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)`,
			chID, int64(math.MaxInt64), []byte("jam"), memberID, int64(1))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 1, "old")), 409, "stale_epoch")
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 2, "gi 2")), 200, "")
	if gi, epoch := e.getGI(owner, ch); gi != b64("gi 2") || epoch != 2 {
		t.Fatalf("kept %q at %d, want the owner's of epoch 2", gi, epoch)
	}
}
