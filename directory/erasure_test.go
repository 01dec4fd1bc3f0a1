package directory

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/feed"
)

// filesHolding names the files in dir that hold any 32-byte piece of b,
// taken every 256 bytes (a blob larger than a page is split over
// overflow pages, so it is never found whole).
func filesHolding(t *testing.T, dir string, b []byte) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // a -wal or -shm file removed meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b); i += 256 {
			if bytes.Contains(data, b[i:min(i+32, len(b))]) {
				out = append(out, e.Name())
				break
			}
		}
	}
	return out
}

// TestConsumedWelcomeLeavesNoBytes: once the joiner has collected and
// acknowledged its Welcome, neither the Welcome nor the completed join
// request (identity, key package) is left anywhere in the directory's
// files, free pages and WAL included, after the next checkpoint.
func TestConsumedWelcomeLeavesNoBytes(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(c *Config) {
		c.DBPath = filepath.Join(dir, "directory.db")
		c.CheckpointInterval = 20 * time.Millisecond
	})
	_, owner := e.account("acme")
	_, joiner := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	// Large enough to spill into overflow pages, small enough for a row.
	kp, welcome := random(6000), random(9000)
	identity := "did:web:" + base64.RawURLEncoding.EncodeToString(random(18)) + ".example"
	r := e.join(joiner, ch, e.invite(owner, ch, 1), identity, kp)
	want(t, r, 201, "")
	id := r.str("request_id")
	// The test can see the bytes while they are stored. The files are
	// read one after the other while checkpoints run, so a read may meet
	// the WAL just emptied into a database file read before: look again.
	seen := func(name string, b []byte) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(filesHolding(t, dir, b)) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the %s is in no file while it is stored", name)
			}
		}
	}
	seen("key package", kp)
	seen("identity", []byte(identity))
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{
		"request_id": id, "welcome": base64.StdEncoding.EncodeToString(welcome),
	}), 200, "")
	r = e.do("GET", "/v1/channels/welcome/"+id, joiner, nil)
	want(t, r, 200, "")
	if got, _ := base64.StdEncoding.DecodeString(r.str("welcome")); !bytes.Equal(got, welcome) {
		t.Fatal("the joiner did not get its Welcome")
	}
	seen("welcome", welcome)
	if r := e.do("POST", "/v1/channels/welcome/"+id+"/ack", joiner, nil); r.body["acked"] != true {
		t.Fatalf("ack = %s", r)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := map[string][]string{}
		for name, b := range map[string][]byte{"key package": kp, "welcome": welcome, "identity": []byte(identity)} {
			if f := filesHolding(t, dir, b); len(f) > 0 {
				left[name] = f
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the ack and checkpoints, still in the files: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDoneClaimsGo: a claim on someone's join offers (who took whose
// offer, for which room) is kept while it is needed: until the offers'
// owner acknowledged it, its claimer delivered the Welcome, and the claim
// window the rate limits count has passed. Then the sweep deletes it; a
// claim still waiting for either stays.
func TestDoneClaimsGo(t *testing.T) {
	fe := newFencedEnv(t, nil)
	e := fe.env
	_, owner := e.account("acme")
	targetID, target := e.account("initech")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	e.relate(target, owner)
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 3, true)), 201, "")
	done := e.claim(owner, targetID, ch)[0]
	undelivered := e.claim(owner, targetID, ch)[0]
	want(t, e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": done, "welcome": b64("welcome")}), 201, "")
	want(t, e.do("DELETE", "/v1/keypackages/claims?through="+undelivered, target, nil), 204, "")
	count := func() int {
		var n int
		if err := e.queryRow(`SELECT count(*) FROM key_package_claims`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sweep := func() {
		if _, err := e.s.store.sweepInbox(t.Context(), e.clock.Now(), DefaultInboxRetention); err != nil {
			t.Fatal(err)
		}
	}
	sweep()
	if n := count(); n != 2 {
		t.Fatalf("%d claims within the claim window, want 2", n)
	}
	e.clock.Advance(claimWindow + time.Second)
	sweep()
	var left string
	if err := e.queryRow(`SELECT id FROM key_package_claims`).Scan(&left); err != nil || count() != 1 || left != undelivered {
		t.Fatalf("after the window: %d claims, the one left %q (%v), want only the undelivered %q", count(), left, err, undelivered)
	}
}

// TestSupersededMembershipEventsGo: the channel feed keeps only the last
// change of each account's membership of a channel (and the fence
// resets), from the moment a later change supersedes an earlier one: a
// reader that read the feed as it stood at any moment, and then reads on
// from the feed as it stands now, ends with the same members as one that
// read every event as it came. A directory that kept superseded events
// loses them at its next sweep.
func TestSupersededMembershipEventsGo(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	aID, _ := e.account("globex")
	bID, _ := e.account("initech")
	const ch = "acme/rooms/churn"
	e.channel(owner, ch)
	// What a reader at each moment saw; every event as it came.
	seen := [][]feed.Event{e.events()}
	var all []feed.Event
	step := func(status int) {
		t.Helper()
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		now := e.events()
		seen = append(seen, now)
		all = append(all, now[len(now)-1])
	}
	all = append(all, seen[0]...)
	for range 3 {
		step(e.addMember(owner, ch, aID).status)
		step(e.do("DELETE", membersPath(ch, aID), owner, nil).status)
	}
	step(e.addMember(owner, ch, aID).status) // a is in
	step(e.addMember(owner, ch, bID).status)
	step(e.do("DELETE", membersPath(ch, bID), owner, nil).status) // b is out
	step(e.do("POST", "/v1/channels/fence", owner, map[string]any{"channel": ch, "epoch": 3}).status)
	wantKept := fmt.Sprintf("member_added %[1]s %[2]s 0\nmember_added %[1]s %[3]s 0\nmember_removed %[1]s %[4]s 0\nfence_reset %[1]s  3\n", ch, ownerID, aID, bID)
	kept := e.events()
	if got := feedString(kept); got != wantKept {
		t.Fatalf("the feed kept:\n%s", got)
	}
	if _, err := e.s.store.sweep(t.Context(), e.clock.Now(), DefaultRetention); err != nil {
		t.Fatal(err)
	}
	if got := feedString(e.events()); got != wantKept {
		t.Fatalf("after a sweep the feed kept:\n%s", got)
	}
	// apply applies evs to the members in (a new set when nil).
	apply := func(evs []feed.Event, in map[string]bool) map[string]bool {
		in = maps.Clone(in)
		if in == nil {
			in = map[string]bool{}
		}
		for _, ev := range evs {
			switch ev.Kind {
			case feed.MemberAdded:
				in[ev.Account] = true
			case feed.MemberRemoved:
				delete(in, ev.Account)
			}
		}
		return in
	}
	full := apply(all, nil)
	for k, then := range seen {
		// Every cursor within what the reader saw then.
		for _, c := range append([]int64{0}, ids(then)...) {
			got := apply(then[:indexOf(then, c)], nil)
			got = apply(after(kept, c), got)
			if !maps.Equal(got, full) {
				t.Fatalf("a reader at cursor %d of the feed after step %d ends with %v, a reader of every event with %v", c, k, got, full)
			}
		}
	}
}

func ids(evs []feed.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// after is the events of evs past the cursor c.
func after(evs []feed.Event, c int64) []feed.Event {
	var out []feed.Event
	for _, ev := range evs {
		if ev.ID > c {
			out = append(out, ev)
		}
	}
	return out
}

// indexOf is the number of events in evs with an id up to id.
func indexOf(evs []feed.Event, id int64) int {
	n := 0
	for _, ev := range evs {
		if ev.ID <= id {
			n++
		}
	}
	return n
}

// TestGroupInfoTimesAreCoarse: a GroupInfo row keeps when it was put to
// the second, as the feed keeps its times, not to the nanosecond (the
// tree rows, put in the same commit, do too).
func TestGroupInfoTimesAreCoarse(t *testing.T) {
	e := newFencedEnv(t, nil).env
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	if e.clock != nil {
		e.clock.Advance(1234567 * time.Microsecond)
	}
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 0, "group_info": base64.StdEncoding.EncodeToString([]byte("gi 0"))}), 200, "")
	var at int64
	if err := e.s.store.db.QueryRow(`SELECT updated_at FROM group_infos`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if at%int64(time.Second) != 0 {
		t.Errorf("the GroupInfo's time is kept as %d, finer than a second", at)
	}
}
