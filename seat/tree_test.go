package seat_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// fillRoom adds n members to owner's room, made with the mls package
// directly (a seat per member would take minutes), in Commits of at most
// batch, each under the relay's 1 MiB frames.
func fillRoom(t *testing.T, owner *member, room string, cs mls.CipherSuite, n, batch int) {
	t.Helper()
	ctx := context.Background()
	cfg := seat.MLSConfig(owner.Seat)
	var kps [][]byte
	flush := func() {
		if err := seat.AddKeyPackages(owner.Seat, ctx, room, kps); err != nil {
			t.Fatalf("adding %d members: %v", len(kps), err)
		}
		kps = kps[:0]
	}
	for i := range n {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mls.NewKeyPackage(cs, seat.DIDKey(pub), priv.Seed(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		kps = append(kps, b.Bytes())
		if len(kps) == batch || i == n-1 {
			flush()
		}
	}
}

// pqRoom starts a stack where alice owns a post-quantum room of that
// name with n members more, added by fillRoom in Commits of batch.
func pqRoom(t *testing.T, name string, n, batch int) (*skytaletest.Stack, *member, string) {
	t.Helper()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	room, err := alice.Room(name).Create(context.Background(), &seat.RoomOptions{Suite: seat.SuitePQ})
	if err != nil {
		t.Fatal(err)
	}
	fillRoom(t, alice, room, seat.SuitePQ, n, batch)
	return st, alice, room
}

// roomTree is the size of owner's room's ratchet tree.
func roomTree(t *testing.T, owner *member, room string) int {
	t.Helper()
	tree, _, err := seat.RoomTree(owner.Seat, context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	return len(tree)
}

// TestRoomLargeTreeOutOfBand: a post-quantum room of 250 members, whose
// Welcome with the ratchet tree in it would be over the directory's 256
// KiB cap, still takes new members, by Welcome and by external Commit: the
// tree goes to the directory in parts, the Welcome and the GroupInfo go
// without it, and the joiners fetch it and check it against the tree
// hash. Everyone then reads everyone.
func TestRoomLargeTreeOutOfBand(t *testing.T) {
	ctx := context.Background()
	st, alice, room := pqRoom(t, "big", 250, 125)
	if n := roomTree(t, alice, room); n <= directory.MaxWelcome {
		t.Fatalf("the tree of 251 post-quantum members is %d bytes, under the Welcome cap", n)
	}

	// By Welcome (the owner admits a join request).
	bob := newMember(t, st, "bobco")
	join(t, alice, bob, room)
	if m, _, err := roomMembers(bob, ctx, room); err != nil || len(m) != 252 {
		t.Fatalf("bob sees %d members: %v", len(m), err)
	}
	sendTo(t, alice, room, "hello, bob")
	expect(t, "bob", received(t, bob, room), "hello, bob")

	// The GroupInfo the directory keeps now leaves the tree out.
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: bob.acct.APIKey}
	_, gi, err := dc.GroupInfo(ctx, room)
	if err != nil || len(gi) >= 64<<10 {
		t.Fatalf("the GroupInfo kept: %d bytes, %v", len(gi), err)
	}

	// By external Commit (an invite that admits on its own), from that
	// GroupInfo, with the owner away.
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	if ch, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil || ch != room {
		t.Fatalf("carol's join by the auto invite: %q %v", ch, err)
	}
	sendTo(t, carol, room, "hello from carol")
	expect(t, "bob", received(t, bob, room), "hello from carol")
	expect(t, "alice", received(t, alice, room), "hello from carol")
	if m, _, err := roomMembers(alice, ctx, room); err != nil || len(m) != 253 {
		t.Fatalf("alice sees %d members: %v", len(m), err)
	}
}

// tamperProxy is a directory in front of the real one that flips a byte
// of every part of a ratchet tree it hands out, and counts them.
func tamperProxy(t *testing.T, apiURL string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	var flipped atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/v1/channels/tree" || !resp.Request.URL.Query().Has("part") || resp.StatusCode != 200 {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			return err
		}
		data, err := base64.StdEncoding.DecodeString(body["data"].(string))
		if err != nil {
			return err
		}
		data[len(data)/2] ^= 0x01
		body["data"] = base64.StdEncoding.EncodeToString(data)
		b, _ = json.Marshal(body)
		flipped.Add(1)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	return ts.URL, &flipped
}

// TestRoomTamperedTreeChangesNothing: a directory that serves a ratchet
// tree with one byte flipped makes the join from the person's inbox fail
// with ErrTreeMismatch, and nothing changes: no room, the Welcome still
// waits, the offer it was made for is kept. Through an honest directory
// the same Welcome then joins.
func TestRoomTamperedTreeChangesNothing(t *testing.T) {
	ctx := context.Background()
	st, alice, room := pqRoom(t, "pq", 60, 60)
	if n := roomTree(t, alice, room); n < 64<<10 {
		t.Fatalf("the tree is %d bytes: too small to go out of band", n)
	}

	proxy, flipped := tamperProxy(t, st.APIURL)
	m := newMemberAt(t, st, proxy, "daveco")
	s, did, acct, home := m.Seat, m.did, m.acct, m.home
	if added, err := alice.Room(room).Add(ctx, acct.AccountID, &seat.AddOptions{Token: addToken(t, m)}); err != nil || len(added) != 1 {
		t.Fatalf("adding dave: %+v %v", added, err)
	}

	joined, err := s.ProcessInbox(ctx)
	if !errors.Is(err, seat.ErrTreeMismatch) || len(joined) != 0 {
		t.Fatalf("the join with a tampered tree: %v %v", joined, err)
	}
	if flipped.Load() == 0 {
		t.Fatal("the proxy served no tree")
	}
	if _, err := s.Room(room).Sync(ctx); err == nil {
		t.Fatal("dave has the room after a refused tree")
	}
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: acct.APIKey}
	if inbox, err := dc.Inbox(ctx); err != nil || len(inbox) != 1 {
		t.Fatalf("dave's inbox after the refused tree: %d %v", len(inbox), err)
	}
	s.Close(context.Background())

	// The same home, through the directory itself.
	dave := &member{Seat: openSeat(t, st, home), did: did, acct: acct, home: home}
	if joined, err := dave.ProcessInbox(ctx); err != nil || !slices.Equal(joined, []string{room}) {
		t.Fatalf("the retry through an honest directory: %v %v", joined, err)
	}
	sendTo(t, alice, room, "hello, dave")
	expect(t, "dave", received(t, dave, room), "hello, dave")

	// A join by external Commit through the same directory is refused
	// the same way, before its Commit goes out: the room does not change.
	before, _, err := roomMembers(alice, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	es := newMemberAt(t, st, proxy, "erinco")
	seen := flipped.Load()
	if _, err := es.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrTreeMismatch) || flipped.Load() == seen {
		t.Fatalf("the external join with a tampered tree: %v", err)
	}
	if _, err := es.Room(room).Sync(ctx); err == nil {
		t.Fatal("erin has the room after a refused tree")
	}
	expect(t, "dave", received(t, dave, room))
	if after, _, err := roomMembers(alice, ctx, room); err != nil || len(after) != len(before) {
		t.Fatalf("alice sees %d members, %d before: %v", len(after), len(before), err)
	}
}

// failingProxy is a directory in front of the real one whose tree reads
// all fail with 502.
func failingProxy(t *testing.T, apiURL string) string {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/channels/tree" && r.Method == "GET" {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestRoomTreeMissing: a join from the inbox whose tree cannot be read
// (the directory fails) is ErrTreeUnavailable and keeps the Welcome and
// the offer; once the directory no longer holds the tree at all (the
// room moved on by more trees than it keeps), the joiner takes the place
// the Welcome gave it by an external Commit that replaces its own leaf,
// and reads and sends from then on.
func TestRoomTreeMissing(t *testing.T) {
	ctx := context.Background()
	st, alice, room := pqRoom(t, "pq", 60, 60)

	m := newMemberAt(t, st, failingProxy(t, st.APIURL), "bobco")
	s, did, acct, home := m.Seat, m.did, m.acct, m.home
	if _, err := alice.Room(room).Add(ctx, acct.AccountID, &seat.AddOptions{Token: addToken(t, m)}); err != nil {
		t.Fatal(err)
	}
	_, welcomeTree, err := seat.RoomTree(alice.Seat, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ProcessInbox(ctx); !errors.Is(err, seat.ErrTreeUnavailable) {
		t.Fatalf("a join whose tree cannot be read: %v", err)
	}
	bc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: acct.APIKey}
	if inbox, err := bc.Inbox(ctx); err != nil || len(inbox) != 1 {
		t.Fatalf("bob's inbox: %d %v", len(inbox), err)
	}
	s.Close(context.Background())

	// Newer trees push the Welcome's out of the directory: three put by
	// hand, and the tree of alice's next Commit, which her GroupInfo
	// leaves out.
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}
	epoch, err := seat.RoomEpoch(alice.Seat, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	for i := range directory.MaxTreesPerChannel - 1 {
		if err := dc.PutTree(ctx, room, "newer-"+strconv.Itoa(i), epoch, []byte("tree")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true}); err != nil {
		t.Fatal(err)
	}
	var ae *seat.APIError
	if _, err := dc.TreeInfo(ctx, room, hex.EncodeToString(welcomeTree)); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("the Welcome's tree is still there: %v", err)
	}
	bob := &member{Seat: openSeat(t, st, home), did: did, acct: acct, home: home}
	if joined, err := bob.ProcessInbox(ctx); err != nil || !slices.Equal(joined, []string{room}) {
		t.Fatalf("a join whose tree is gone: %v %v", joined, err)
	}
	converse(t, room, alice, bob, "hello, bob", "hello from bob")
	if m, _, err := roomMembers(alice, ctx, room); err != nil || len(m) != 62 {
		t.Fatalf("alice sees %d members: %v", len(m), err)
	}
}

// TestPutTreeOnce: a tree goes up in parts of 1 MiB once per id (a second
// PutTree sends its first part, which comes back complete, and no other),
// comes back byte for byte to a member, and is refused to a stranger.
func TestPutTreeOnce(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(st.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	var puts atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PUT" && r.URL.Path == "/v1/channels/tree" {
			puts.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer ts.Close()
	dc := &seat.DirectoryClient{BaseURL: ts.URL, Credential: alice.acct.APIKey}
	tree := make([]byte, 2<<20+100)
	rand.Read(tree)
	for range 2 {
		if err := dc.PutTree(ctx, room, "abc", 0, tree); err != nil {
			t.Fatal(err)
		}
	}
	if n := puts.Load(); n != 4 {
		t.Fatalf("%d parts put for a tree of 3 parts put twice", n)
	}
	got, err := dc.FetchTree(ctx, room, "abc")
	if err != nil || !bytes.Equal(got, tree) {
		t.Fatalf("the tree read back: %d bytes, %v", len(got), err)
	}
	if _, err := dc.FetchTree(ctx, room, "nothing"); !errors.Is(err, seat.ErrTreeUnavailable) {
		t.Fatalf("a tree that is not there: %v", err)
	}
	if err := dc.PutTree(ctx, room, "huge", 0, make([]byte, 64<<20+1)); err == nil {
		t.Fatal("a tree over 64 MiB was put")
	}
	stranger := newMember(t, st, "hooli")
	sc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: stranger.acct.APIKey}
	if _, err := sc.FetchTree(ctx, room, "abc"); !errors.Is(err, seat.ErrNotMember) && !isStatus(err, 403) {
		t.Fatalf("a stranger's read: %v", err)
	}
}

func isStatus(err error, status int) bool {
	var ae *seat.APIError
	return errors.As(err, &ae) && ae.Status == status
}

// TestRoomTreeSquatted: a member of a large room who learns the hash of
// the room's new tree the moment the owner's Commit is out, and puts its
// own bytes under that id before the owner shares the GroupInfo, changes
// nothing: the owner still puts the tree (its own, apart from the
// member's), the GroupInfo names it, and a newcomer joins by external
// Commit from it; a newcomer by Welcome still joins too. A tree for an
// epoch the fence has not reached is refused with epoch_not_reached.
// Before, the owner found the member's tree complete under that id and
// put none, and the newcomer got the member's bytes (ErrTreeMismatch).
func TestRoomTreeSquatted(t *testing.T) {
	ctx := context.Background()
	st, alice, room := pqRoom(t, "squat", 60, 60)
	mallory := newMember(t, st, "malco")
	join(t, alice, mallory, room)
	mc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: mallory.acct.APIKey}

	epoch, err := seat.RoomEpoch(mallory.Seat, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	var ae *seat.APIError
	err = mc.PutTree(ctx, room, "far", epoch+2, []byte("junk"))
	if !errors.As(err, &ae) || ae.Code != "epoch_not_reached" {
		t.Fatalf("a tree two epochs ahead: %v", err)
	}
	err = mc.PutTree(ctx, room, "far", 1<<62, []byte("junk"))
	if !errors.As(err, &ae) || ae.Code != "epoch_not_reached" {
		t.Fatalf("a tree far ahead: %v", err)
	}

	// Alice's next Commit (the one listing an auto invite) makes a new
	// tree, which her GroupInfo leaves out. Right after the relay took
	// the Commit, mallory reads it and puts junk under the new tree's id.
	var squatted atomic.Bool
	var squatErr error
	restore := seat.SetTestOnlyAfterCommit(func() error {
		if squatted.Swap(true) {
			return nil
		}
		if _, err := mallory.Room(room).Sync(ctx); err != nil {
			squatErr = err
			return nil
		}
		_, h, err := seat.RoomTree(mallory.Seat, ctx, room)
		if err != nil {
			squatErr = err
			return nil
		}
		e, err := seat.RoomEpoch(mallory.Seat, ctx, room)
		if err != nil {
			squatErr = err
			return nil
		}
		squatErr = mc.PutTree(ctx, room, hex.EncodeToString(h), e, []byte("mallory's junk"))
		return nil
	})
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if !squatted.Load() || squatErr != nil {
		t.Fatalf("mallory's squat: ran %v, %v", squatted.Load(), squatErr)
	}

	carol := newMember(t, st, "carolco")
	if ch, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil || ch != room {
		t.Fatalf("carol's join by the auto invite after the squat: %q %v", ch, err)
	}
	sendTo(t, carol, room, "hello from carol")
	expect(t, "alice", received(t, alice, room), "hello from carol")

	bob := newMember(t, st, "bobco")
	join(t, alice, bob, room)
	converse(t, room, alice, bob, "hello, bob", "hello from bob")
}
