package seat_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/padding"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// storedBlobs reads, from the directory's database file, the length of
// every payload a seat put there that it still keeps: join requests' key
// packages and Welcomes, stock key packages, inbox Welcomes, GroupInfos
// and the ratchet trees (all parts of one together).
func storedBlobs(t *testing.T, path string) map[string][]int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]int{}
	for what, q := range map[string]string{
		"join request key package": `SELECT LENGTH(key_package) FROM join_requests`,
		"join request Welcome":     `SELECT LENGTH(welcome) FROM join_requests WHERE welcome IS NOT NULL`,
		"stock key package":        `SELECT LENGTH(key_package) FROM key_packages`,
		"inbox Welcome":            `SELECT LENGTH(welcome) FROM inbox`,
		"GroupInfo":                `SELECT LENGTH(group_info) FROM group_infos`,
		"ratchet tree":             `SELECT SUM(LENGTH(data)) FROM channel_tree_parts GROUP BY tree_seq`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[what] = append(out[what], n)
		}
		rows.Close()
	}
	return out
}

// TestDirectoryKeepsBucketLengths: every payload a seat puts at the
// directory (key packages of joins and of the stock, Welcomes of joins and
// of adds, GroupInfos) is kept at a bucket length, as the relay keeps
// messages, not at its own; and the seats still join from them.
func TestDirectoryKeepsBucketLengths(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "directory.db")
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{DBPath: dbPath}})
	seen := map[string]int{}
	check := func(when string) {
		t.Helper()
		for what, ns := range storedBlobs(t, dbPath) {
			for _, n := range ns {
				seen[what]++
				if !padding.Valid(n) {
					t.Errorf("%s: a %s is kept at %d bytes, not a bucket length", when, what, n)
				}
			}
		}
	}
	alice := newMember(t, st, "acme")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	bob := newMember(t, st, "bobco")
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("join before admit: %v", err)
	}
	check("a join request waiting")
	if _, err := alice.Room(room).Admit(ctx); err != nil {
		t.Fatal(err)
	}
	check("a join request admitted")
	if _, err := bob.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// An add from the stock: dave is offline, his Welcome waits in his
	// inbox.
	dave := newMember(t, st, "daveco")
	if _, err := dave.Restock(ctx); err != nil {
		t.Fatal(err)
	}
	daveToken, err := dave.ContactToken(ctx, time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room(room).Add(ctx, dave.acct.AccountID, &seat.AddOptions{Token: daveToken.Token}); err != nil {
		t.Fatal(err)
	}
	check("an add waiting in the inbox")
	sendTo(t, bob, room, "hello")
	if joined, err := dave.ProcessInbox(ctx); err != nil || !slices.Equal(joined, []string{room}) {
		t.Fatalf("dave's inbox: %v %v", joined, err)
	}
	expect(t, "dave", received(t, dave, room), "hello")
	check("the end")
	for _, what := range []string{"join request key package", "join request Welcome", "stock key package", "inbox Welcome", "GroupInfo"} {
		if seen[what] == 0 {
			t.Errorf("no %s was kept at any point: the test did not see it", what)
		}
	}
}

// capturedBodies is a proxy in front of the directory that keeps the
// bodies of the requests to one path.
func capturedBodies(t *testing.T, target, path string) (url string, bodies func() [][]byte) {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var got [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			mu.Lock()
			got = append(got, b)
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// piecesIn counts the files under dir holding a 32-byte piece of b taken
// every 256 bytes (a blob larger than a page is split over overflow pages).
func piecesIn(t *testing.T, dir string, b []byte) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil // a -wal or -shm file removed meanwhile
		}
		for i := 0; i+32 <= len(b); i += 256 {
			if bytes.Count(b[i:i+32], []byte{0}) > 8 {
				continue // zeros and structure, not the blob's own bytes
			}
			if bytes.Contains(data, b[i:i+32]) {
				out = append(out, filepath.Base(p))
				break
			}
		}
		return nil
	})
	return out
}

// TestConsumedWelcomeIsGoneFromTheStack: on a real stack of SQLite
// files, a joiner's Welcome (as the owner's seat put it, padded) and the
// key package of its join request are in the directory's files while
// they wait, and nowhere in them (free pages and WAL included) once the
// joiner has joined and the next checkpoint has run.
func TestConsumedWelcomeIsGoneFromTheStack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db"), CheckpointInterval: 20 * time.Millisecond},
	})
	apiURL, welcomes := capturedBodies(t, st.APIURL, "/v1/channels/welcome")
	alice := newMemberAt(t, st, apiURL, "acme")
	bob := newMember(t, st, "bobco")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("join before admit: %v", err)
	}
	pending, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}).Pending(ctx, mustChannel(t, alice, room))
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	kp := pending[0].KeyPackage
	if _, err := alice.Room(room).Admit(ctx); err != nil {
		t.Fatal(err)
	}
	var welcome []byte
	for _, b := range welcomes() {
		var req struct {
			Welcome []byte `json:"welcome"`
		}
		if err := json.Unmarshal(b, &req); err == nil && req.Welcome != nil {
			welcome = req.Welcome
		}
	}
	if len(welcome) < 1024 {
		t.Fatalf("no Welcome was put (%d bytes)", len(welcome))
	}
	// The Welcome's own bytes (its padding is zeros, found anywhere), past
	// the header every Welcome shares.
	if welcome, err = padding.Unpad(welcome); err != nil {
		t.Fatalf("the Welcome was put unpadded: %v", err)
	}
	welcome = welcome[8:]
	// The key package's init key: its own, where the rest (credential,
	// signature key) is in every offer of the same device.
	kp = kp[5:37]
	if f := piecesIn(t, dir, welcome); len(f) == 0 {
		t.Fatal("the Welcome is in no file while it waits: the test cannot see it")
	}
	if f := piecesIn(t, dir, kp); len(f) == 0 {
		t.Fatal("the key package is in no file while it waits: the test cannot see it")
	}
	if _, err := bob.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waitfor.Nil(t, 15*time.Second, func() error {
		left := map[string][]string{}
		if f := piecesIn(t, dir, welcome); len(f) > 0 {
			left["Welcome"] = f
		}
		if f := piecesIn(t, dir, kp); len(f) > 0 {
			left["key package"] = f
		}
		if len(left) == 0 {
			return nil
		}
		return fmt.Errorf("after the join and checkpoints, still in the directory's files: %v", left)
	})
	converse(t, room, alice, bob, "hi", "hello")
}

func mustChannel(t *testing.T, m *member, room string) string {
	t.Helper()
	ch, err := m.Room(room).Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestLinkBoxIsPadded: the box an approving device seals to a linked
// device waits at the directory at a bucket length (plus HPKE's 32-byte
// encapsulated key and 16-byte tag), not at its own, and the device still
// opens it.
func TestLinkBoxIsPadded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbPath := filepath.Join(t.TempDir(), "directory.db")
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{DBPath: dbPath}})
	alice := newMember(t, st, "acme")
	for _, name := range []string{"ops", "dev"} {
		if _, err := alice.Room(name).Create(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	d := openSeat(t, st, t.TempDir())
	g, err := d.RequestLink(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ApproveDevice(ctx, g.UserCode, g.Fingerprint); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT LENGTH(sealed_seat) FROM device_grants WHERE sealed_seat IS NOT NULL`).Scan(&n); err != nil {
		t.Fatalf("the approved grant's box: %v", err)
	}
	const hpkeOverhead = 32 + 16
	if !padding.Valid(n - hpkeOverhead) {
		t.Errorf("the link box waits at %d bytes: %d is not a bucket length", n, n-hpkeOverhead)
	}
	g.PollInterval = 20 * time.Millisecond
	r, err := d.WaitLink(ctx, g)
	if err != nil {
		t.Fatalf("the device opens the padded box: %v", err)
	}
	if r.Person != alice.did || r.OfferErr != nil || len(r.Offered) != 2 {
		t.Errorf("linked as %+v: the box's person and its two rooms did not arrive", r)
	}
}
