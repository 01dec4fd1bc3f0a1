package directory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/feed"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// membersPath is the DELETE (and GET) form of /v1/channels/members.
func membersPath(channel, account string) string {
	q := url.Values{"channel": {channel}}
	if account != "" {
		q.Set("account_id", account)
	}
	return "/v1/channels/members?" + q.Encode()
}

// addMember asks, with key, that account be made a member of channel.
func (e *env) addMember(key, channel, account string) reply {
	return e.do("POST", "/v1/channels/members", key, map[string]string{"channel": channel, "account_id": account})
}

// events reads the whole channel feed in process.
func (e *env) events() []feed.Event {
	e.t.Helper()
	var all []feed.Event
	var after int64
	for {
		evs, next, err := e.s.ChannelEventsSince(context.Background(), after)
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, evs...)
		if len(evs) == 0 {
			if next != after {
				e.t.Fatalf("empty page moved the cursor from %d to %d", after, next)
			}
			return all
		}
		after = next
	}
}

// feedString renders events without their ids, one per line.
func feedString(evs []feed.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s %s %s %d\n", ev.Kind, ev.Channel, ev.Account, ev.Epoch)
	}
	return b.String()
}

func TestMembersHostile(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	memberID, member := e.account("globex")
	strangerID, stranger := e.account("initech")
	const ch = "acme/rooms/payroll"
	const other = "acme/rooms/other"
	e.channel(owner, ch)
	e.channel(owner, other)
	want(t, e.addMember(owner, ch, memberID), 200, "")
	seat := e.do("POST", "/v1/seats", owner, e.seatBody(owner, "z6MkScoped", other))
	want(t, seat, 201, "")
	scoped := seat.str("credential")
	scopedJWT := e.jwt(scoped, nil)

	before := e.snapshot()
	// Not the owner: neither a member nor a stranger may add anyone.
	want(t, e.addMember(member, ch, strangerID), 403, "not_owner")
	want(t, e.addMember(stranger, ch, strangerID), 403, "not_owner")
	// A credential scoped to another channel of the owner.
	want(t, e.addMember(scoped, ch, strangerID), 403, "forbidden")
	want(t, e.addMember(scopedJWT, ch, strangerID), 403, "forbidden")
	// Wrong or malformed channel, unknown account, bad bodies.
	want(t, e.addMember(owner, "acme/rooms/none", strangerID), 404, "channel_not_found")
	want(t, e.addMember(owner, "acme/rooms", strangerID), 400, "invalid_channel")
	want(t, e.addMember(owner, ch, "no-such-account"), 404, "account_not_found")
	want(t, e.addMember(owner, ch, ""), 400, "invalid_request")
	want(t, e.addMember(owner, ch, strings.Repeat("a", 65)), 400, "invalid_request")
	want(t, e.do("POST", "/v1/channels/members", owner, `{"channel":`), 400, "invalid_json")
	want(t, e.do("POST", "/v1/channels/members", owner, `{"channel":"`+ch+`","account_id":7}`), 400, "invalid_json")
	want(t, e.do("POST", "/v1/channels/members", owner, `{"channel":"`+ch+`","account_id":"x","extra":1}`), 400, "invalid_json")
	want(t, e.do("POST", "/v1/channels/members", "", map[string]string{"channel": ch, "account_id": strangerID}), 401, "unauthorized")

	// Removal: a member may not remove another, a stranger nobody, and
	// nobody the owner.
	want(t, e.do("DELETE", membersPath(ch, ownerID), member, nil), 403, "not_owner")
	want(t, e.do("DELETE", membersPath(ch, memberID), stranger, nil), 403, "not_owner")
	want(t, e.do("DELETE", membersPath(ch, ownerID), owner, nil), 409, "owner_cannot_leave")
	want(t, e.do("DELETE", membersPath(ch, memberID), scoped, nil), 403, "forbidden")
	want(t, e.do("DELETE", membersPath(ch, "no-such-account"), owner, nil), 404, "account_not_found")
	want(t, e.do("DELETE", membersPath(ch, ""), owner, nil), 400, "invalid_request")
	want(t, e.do("DELETE", membersPath(ch, strings.Repeat("a", 65)), owner, nil), 400, "invalid_request")
	want(t, e.do("DELETE", membersPath("acme/rooms/none", memberID), owner, nil), 404, "channel_not_found")
	want(t, e.do("DELETE", membersPath("bad name", memberID), owner, nil), 400, "invalid_channel")

	// Listing: owner and members only.
	want(t, e.do("GET", membersPath(ch, ""), stranger, nil), 403, "not_member")
	want(t, e.do("GET", membersPath(ch, ""), scoped, nil), 403, "forbidden")
	want(t, e.do("GET", membersPath("acme/rooms/none", ""), owner, nil), 404, "channel_not_found")
	want(t, e.do("GET", "/v1/channels/members", owner, nil), 400, "invalid_channel")

	if e.snapshot() != before {
		t.Fatal("a refused membership request changed the store")
	}

	// The scoped credential acts on its own channel: it belongs to the owner.
	want(t, e.addMember(scoped, other, memberID), 200, "")
	want(t, e.do("GET", membersPath(other, ""), scopedJWT, nil), 200, "")
}

func TestMembersFlow(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	aID, a := e.account("globex")
	bID, _ := e.account("initech")
	const ch = "acme/rooms/payroll"
	e.channel(owner, ch)
	// Registering again (idempotent) does not add the owner twice.
	e.channel(owner, ch)

	list := func(key string) reply {
		r := e.do("GET", membersPath(ch, ""), key, nil)
		want(t, r, 200, "")
		return r
	}
	ids := func(r reply) []string {
		var out []string
		for _, m := range r.body["members"].([]any) {
			m := m.(map[string]any)
			if _, err := time.Parse(time.RFC3339, m["added_at"].(string)); err != nil {
				t.Fatalf("added_at %v", m["added_at"])
			}
			out = append(out, m["account_id"].(string))
		}
		return out
	}
	r := list(owner)
	if r.str("channel") != ch || r.str("owner") != ownerID || fmt.Sprint(ids(r)) != fmt.Sprint([]string{ownerID}) {
		t.Fatalf("members after registration = %s", r)
	}

	e.clock.Advance(time.Second)
	r = e.addMember(owner, ch, aID)
	want(t, r, 200, "")
	if strings.TrimSpace(string(r.raw)) != fmt.Sprintf(`{"channel":%q,"account_id":%q,"member":true}`, ch, aID) {
		t.Fatalf("add = %s", r)
	}
	// Idempotent: same answer, no second event.
	want(t, e.addMember(owner, ch, aID), 200, "")
	e.clock.Advance(time.Second)
	want(t, e.addMember(owner, ch, bID), 200, "")

	// A member sees the list too, oldest first.
	if got := fmt.Sprint(ids(list(a))); got != fmt.Sprint([]string{ownerID, aID, bID}) {
		t.Fatalf("members = %s", got)
	}

	// A member removes itself; the owner removes another; removing a
	// non-member again answers the same and writes nothing.
	r = e.do("DELETE", membersPath(ch, aID), a, nil)
	want(t, r, 200, "")
	if strings.TrimSpace(string(r.raw)) != fmt.Sprintf(`{"channel":%q,"account_id":%q,"member":false}`, ch, aID) {
		t.Fatalf("remove = %s", r)
	}
	want(t, e.do("GET", membersPath(ch, ""), a, nil), 403, "not_member")
	want(t, e.do("DELETE", membersPath(ch, aID), a, nil), 200, "")
	want(t, e.do("DELETE", membersPath(ch, bID), a, nil), 403, "not_owner")
	want(t, e.do("DELETE", membersPath(ch, bID), owner, nil), 200, "")
	want(t, e.do("DELETE", membersPath(ch, bID), owner, nil), 200, "")
	if got := fmt.Sprint(ids(list(owner))); got != fmt.Sprint([]string{ownerID}) {
		t.Fatalf("members after removals = %s", got)
	}

	// Each membership's last change: the adds of a and b went as their
	// removals were written.
	wantFeed := fmt.Sprintf("member_added %[1]s %[2]s 0\nmember_removed %[1]s %[3]s 0\nmember_removed %[1]s %[4]s 0\n", ch, ownerID, aID, bID)
	evs := e.events()
	if got := feedString(evs); got != wantFeed {
		t.Fatalf("feed:\n%s\nwant:\n%s", got, wantFeed)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Fatalf("feed ids not increasing: %+v", evs)
		}
	}
}

// TestMembersFromJoins: the owner's Welcome makes the joiner a member,
// federated or not; a seat's sync channel has its account as member.
func TestMembersFromJoins(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	joinerID, joiner := e.account("globex")
	partnerID, partner := e.account("partner")
	const ch = "acme/rooms/payroll"
	e.channel(owner, ch)

	id := e.join(joiner, ch, e.invite(owner, ch, 1), "did:web:j", []byte("kp")).str("request_id")
	r := e.do("POST", "/v1/federation/invites", owner, map[string]any{"channel": ch, "org": "partner"})
	want(t, r, 201, "")
	fid := e.do("POST", "/v1/channels/join", partner, map[string]string{
		"channel": ch, "federation_token": r.str("token"), "identity": "did:web:p",
		"key_package": base64.StdEncoding.EncodeToString([]byte("kp")),
	}).str("request_id")

	// Queued is not a member yet.
	want(t, e.do("GET", membersPath(ch, ""), joiner, nil), 403, "not_member")
	for _, rid := range []string{id, fid} {
		want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": rid, "welcome": "AA=="}), 200, "")
	}
	want(t, e.do("GET", membersPath(ch, ""), joiner, nil), 200, "")
	want(t, e.do("GET", membersPath(ch, ""), partner, nil), 200, "")

	// A second request of a member changes nothing in the feed.
	id2 := e.join(joiner, ch, e.invite(owner, ch, 1), "did:web:j2", []byte("kp")).str("request_id")
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": id2, "welcome": "AA=="}), 200, "")

	want(t, e.do("POST", "/v1/seats", joiner, e.seatBody(joiner, "z6MkJ", "globex/seat/home")), 201, "")

	wantFeed := fmt.Sprintf("member_added %[1]s %[2]s 0\nmember_added %[1]s %[3]s 0\nmember_added %[1]s %[4]s 0\nmember_added globex/seat/home %[3]s 0\n", ch, ownerID, joinerID, partnerID)
	if got := feedString(e.events()); got != wantFeed {
		t.Fatalf("feed:\n%s\nwant:\n%s", got, wantFeed)
	}
}

func TestFenceReset(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	jammerID, jammer := e.account("globex")
	strangerID, stranger := e.account("initech")
	const ch = "acme/rooms/payroll"
	e.channel(owner, ch)
	e.channel(owner, "acme/rooms/other")
	want(t, e.addMember(owner, ch, jammerID), 200, "")
	scoped := e.do("POST", "/v1/seats", owner, e.seatBody(owner, "z6MkF", "acme/rooms/other")).str("credential")

	fence := func(key string, body any) reply { return e.do("POST", "/v1/channels/fence", key, body) }
	before := e.snapshot()
	want(t, fence(jammer, map[string]any{"channel": ch, "epoch": 1}), 403, "not_owner")
	want(t, fence(stranger, map[string]any{"channel": ch, "epoch": 1, "remove_account_id": jammerID}), 403, "not_owner")
	want(t, fence(scoped, map[string]any{"channel": ch, "epoch": 1}), 403, "forbidden")
	want(t, fence(owner, map[string]any{"channel": "acme/rooms/none", "epoch": 1}), 404, "channel_not_found")
	want(t, fence(owner, map[string]any{"channel": ch}), 400, "invalid_request")
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": 1, "remove_account_id": strings.Repeat("a", 65)}), 400, "invalid_request")
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": uint64(1<<32 + 1)}), 400, "invalid_request")
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": uint64(1<<64 - 1)}), 400, "invalid_request")
	want(t, fence(owner, `{"channel":"`+ch+`","epoch":-1}`), 400, "invalid_json")
	want(t, fence(owner, `{"channel":"`+ch+`","epoch":1.5}`), 400, "invalid_json")
	want(t, fence(owner, `{"channel":"`+ch+`","epoch":"1"}`), 400, "invalid_json")
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": 1, "remove_account_id": ownerID}), 409, "owner_cannot_leave")
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": 1, "remove_account_id": "no-such-account"}), 404, "account_not_found")
	if e.snapshot() != before {
		t.Fatal("a refused fence reset changed the store")
	}
	evsBefore := e.events()
	lastBefore := evsBefore[len(evsBefore)-1].ID

	r := fence(owner, map[string]any{"channel": ch, "epoch": 7, "remove_account_id": jammerID})
	want(t, r, 200, "")
	if strings.TrimSpace(string(r.raw)) != fmt.Sprintf(`{"channel":%q,"epoch":7}`, ch) {
		t.Fatalf("fence = %s", r)
	}
	want(t, e.do("GET", membersPath(ch, ""), jammer, nil), 403, "not_member")
	// The bound is inclusive; epoch 0 is a valid reset; removing a
	// non-member just resets.
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": uint64(1 << 32)}), 200, "")
	want(t, fence(owner, map[string]any{"channel": ch, "epoch": 0, "remove_account_id": strangerID}), 200, "")

	got := feedString(after(e.events(), lastBefore))
	wantFeed := fmt.Sprintf("member_removed %[1]s %[2]s 0\nfence_reset %[1]s  7\nfence_reset %[1]s  4294967296\nfence_reset %[1]s  0\n", ch, jammerID)
	if got != wantFeed {
		t.Fatalf("feed:\n%s\nwant:\n%s", got, wantFeed)
	}
}

func TestInternalChannelEvents(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	for i := range 3 {
		e.channel(owner, fmt.Sprintf("acme/rooms/r%d", i))
	}
	_, other := e.account("globex")
	for _, tok := range []string{"", other, owner, "wrong-secret"} {
		want(t, e.do("GET", "/v1/internal/channels/events", tok, nil), 401, "unauthorized")
	}
	for _, q := range []string{"-1", "x", "1.5", "99999999999999999999"} {
		want(t, e.do("GET", "/v1/internal/channels/events?after="+q, testInternalSecret, nil), 400, "invalid_request")
	}
	r := e.do("GET", "/v1/internal/channels/events", testInternalSecret, nil)
	want(t, r, 200, "")
	evs := r.body["events"].([]any)
	if len(evs) != 3 || r.body["next"] != float64(3) {
		t.Fatalf("page = %s", r)
	}
	first := evs[0].(map[string]any)
	if first["id"] != float64(1) || first["kind"] != "member_added" || first["channel"] != "acme/rooms/r0" || first["account_id"] == "" {
		t.Fatalf("first event = %v", first)
	}
	r = e.do("GET", "/v1/internal/channels/events?after=2", testInternalSecret, nil)
	if evs := r.body["events"].([]any); len(evs) != 1 || r.body["next"] != float64(3) {
		t.Fatalf("page after 2 = %s", r)
	}
	r = e.do("GET", "/v1/internal/channels/events?after=3", testInternalSecret, nil)
	if strings.TrimSpace(string(r.raw)) != `{"events":[],"next":3}` {
		t.Fatalf("empty page = %s", r)
	}
	// The revocation feed shares the cursor rules.
	want(t, e.do("GET", "/v1/internal/revocations?after=-1", testInternalSecret, nil), 400, "invalid_request")
	want(t, e.do("GET", "/v1/internal/revocations", other, nil), 401, "unauthorized")
}

// TestChannelEventsPaging: a page holds at most feed.PageSize events and
// the cursor walks the whole feed in order.
func TestChannelEventsPaging(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	const ch = "acme/rooms/big"
	e.channel(owner, ch)
	ids := make([]string, 0, feed.PageSize+5)
	for i := range feed.PageSize + 5 {
		id := fmt.Sprintf("acct-%04d", i)
		if _, err := e.exec(`INSERT INTO accounts (id, email, org, created_at) VALUES (?, 'x@y', 'z', 0)`, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if err := e.s.store.addMemberByOwner(t.Context(), ch, ownerOf(t, e, ch), id, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	evs, next, err := e.s.ChannelEventsSince(t.Context(), 0)
	if err != nil || len(evs) != feed.PageSize || next != evs[len(evs)-1].ID {
		t.Fatalf("first page: %d events, next %d, %v", len(evs), next, err)
	}
	if got := len(e.events()); got != feed.PageSize+6 {
		t.Fatalf("%d events in all", got)
	}
}

func ownerOf(t *testing.T, e *env, ch string) string {
	var owner string
	if err := e.queryRow(`SELECT owner_id FROM channels WHERE name = ?`, ch).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// oldDatabase makes a database file with only the first n migrations
// applied, as an older build left it, and returns its path and an open
// handle for the test to fill and close.
func oldDatabase(t *testing.T, n int) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitedb.Migrate(t.Context(), db, sqliteMigrations[:n]); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// TestMembersBackfill opens a database written with the schema before
// channel members existed: owners and completed joiners become members,
// each with a member_added event, and pending joiners do not.
func TestMembersBackfill(t *testing.T) {
	path, db := oldDatabase(t, 2)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"owner", "owner2", "joiner", "waiting"} {
		exec(`INSERT INTO accounts (id, email, org, created_at) VALUES (?, ?, 'acme', 1)`, a, a+"@example.com")
	}
	exec(`INSERT INTO channels (id, name, owner_id, created_at) VALUES ('c1', 'acme/a/one', 'owner', 10), ('c2', 'acme/a/two', 'owner2', 20)`)
	exec(`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, welcome, status, created_at, updated_at) VALUES
		('r1', 'c1', 'joiner', 'did:web:1', x'00', x'01', 'completed', 11, 15),
		('r2', 'c1', 'joiner', 'did:web:2', x'00', x'01', 'completed', 12, 30),
		('r3', 'c1', 'waiting', 'did:web:3', x'00', NULL, 'pending', 13, 13),
		('r4', 'c2', 'owner', 'did:web:4', x'00', x'01', 'completed', 21, 25)`)
	db.Close()

	c := newClock()
	e := newEnvFrom(t, Config{JWTSecret: testJWTSecret, InternalSecret: []byte(testInternalSecret), DBPath: path, Now: c.Now}, c)
	defer e.close()
	wantFeed := "member_added acme/a/one owner 0\nmember_added acme/a/one joiner 0\nmember_added acme/a/two owner2 0\nmember_added acme/a/two owner 0\n"
	if got := feedString(e.events()); got != wantFeed {
		t.Fatalf("back-filled feed:\n%s\nwant:\n%s", got, wantFeed)
	}
	var added int64
	if err := e.queryRow(`SELECT added_at FROM channel_members WHERE channel_id = 'c1' AND account_id = 'joiner'`).Scan(&added); err != nil || added != 15 {
		t.Fatalf("joiner added_at %d, %v", added, err)
	}
	var n int
	if err := e.queryRow(`SELECT COUNT(*) FROM channel_members WHERE account_id = 'waiting'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("pending joiner is a member (%d, %v)", n, err)
	}
}
