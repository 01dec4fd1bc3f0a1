package directory

// Races over HTTP, on every backend: many requests at the same moment
// that each check and change one piece of state. On SQLite the single
// writer settles them; on PostgreSQL the statements and row locks of the
// store's operations must.

import (
	"fmt"
	"testing"
)

// wantCounts fails unless the raced requests were answered with exactly
// the given statuses.
func wantCounts(t *testing.T, count map[int]int, want map[int]int) {
	t.Helper()
	if len(count) != len(want) {
		t.Fatalf("statuses %v, want %v", count, want)
	}
	for s, n := range want {
		if count[s] != n {
			t.Fatalf("statuses %v, want %v", count, want)
		}
	}
}

// TestRaceFederationJoins: 12 federated joins at once on a federation
// invite with max_uses 3: exactly 3 are queued.
func TestRaceFederationJoins(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/shared/agents"
		e.channel(owner, ch)
		r := e.do("POST", "/v1/federation/invites", owner, map[string]any{"channel": ch, "org": "partner", "max_uses": 3})
		want(t, r, 201, "")
		fed := r.str("token")
		keys := make([]string, 12)
		for i := range keys {
			_, keys[i] = e.account("partner")
		}
		count := raceStatuses(len(keys), func(i int) int {
			return e.do("POST", "/v1/channels/join", keys[i], map[string]string{
				"channel": ch, "federation_token": fed, "identity": fmt.Sprint("did:web:p", i), "key_package": "AAEC",
			}).status
		})
		wantWinners(t, count, 3, 9)
		var uses, pending int
		e.queryRow(`SELECT uses FROM federation_invites`).Scan(&uses)
		e.queryRow(`SELECT COUNT(*) FROM join_requests`).Scan(&pending)
		if uses != 3 || pending != 3 {
			t.Fatalf("uses %d, requests %d", uses, pending)
		}
	})
}

// TestRaceSignupsCreatingOneOrg: 10 signups at once for an org nobody has
// yet: one creates and owns it, the others are told it is taken.
func TestRaceSignupsCreatingOneOrg(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		count := raceStatuses(10, func(i int) int {
			return e.do("POST", "/v1/accounts", "", map[string]string{"email": fmt.Sprintf("u%d@new.example", i), "org": "newco"}).status
		})
		wantCounts(t, count, map[int]int{201: 1, 403: 9})
		var orgs, accounts int
		e.queryRow(`SELECT COUNT(*) FROM orgs WHERE name = 'newco'`).Scan(&orgs)
		e.queryRow(`SELECT COUNT(*) FROM accounts WHERE org = 'newco'`).Scan(&accounts)
		if orgs != 1 || accounts != 1 {
			t.Fatalf("orgs %d, accounts %d", orgs, accounts)
		}
	})
}

// TestRaceChannelRegistration: 8 accounts of one org register one channel
// name at once: one owns it, the others get 409, and the channel has one
// member.
func TestRaceChannelRegistration(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		keys := make([]string, 8)
		for i := range keys {
			_, keys[i] = e.account("acme")
		}
		count := raceStatuses(len(keys), func(i int) int {
			return e.do("POST", "/v1/channels", keys[i], map[string]string{"name": "acme/pay/agent"}).status
		})
		wantCounts(t, count, map[int]int{201: 1, 409: 7})
		var members, events int
		e.queryRow(`SELECT COUNT(*) FROM channel_members`).Scan(&members)
		e.queryRow(`SELECT COUNT(*) FROM channel_events`).Scan(&events)
		if members != 1 || events != 1 {
			t.Fatalf("members %d, events %d", members, events)
		}
	})
}

// TestRaceSeatRegistration: one identity registered 8 times at once, as
// seats of 8 accounts: exactly one seat and one credential exist.
func TestRaceSeatRegistration(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		keys := make([]string, 8)
		for i := range keys {
			_, keys[i] = e.account("acme")
		}
		count := raceStatuses(len(keys), func(i int) int {
			return e.do("POST", "/v1/seats", keys[i], map[string]string{
				"identity": "did:key:z6MkRace", "channel": fmt.Sprintf("acme/seat/s%d", i),
			}).status
		})
		wantCounts(t, count, map[int]int{201: 1, 409: 7})
		var seats, scoped, channels int
		e.queryRow(`SELECT COUNT(*) FROM seats`).Scan(&seats)
		e.queryRow(`SELECT COUNT(*) FROM api_keys WHERE channel != ''`).Scan(&scoped)
		e.queryRow(`SELECT COUNT(*) FROM channels`).Scan(&channels)
		if seats != 1 || scoped != 1 || channels != 1 {
			t.Fatalf("seats %d, scoped keys %d, channels %d", seats, scoped, channels)
		}
	})
}

// TestRaceGrantApprovals: 8 devices of one account approve one user code
// at once: one approval wins, the others are told it is approved, and one
// API key is minted.
func TestRaceGrantApprovals(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		r := e.do("POST", "/v1/device/grants", "", grantBody(t))
		want(t, r, 201, "")
		code := r.str("user_code")
		var before int
		e.queryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&before)
		count := raceStatuses(8, func(int) int {
			return e.do("POST", "/v1/device/grants/approve", owner, map[string]string{"user_code": code}).status
		})
		wantCounts(t, count, map[int]int{200: 1, 409: 7})
		var after int
		e.queryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&after)
		if after != before+1 {
			t.Fatalf("%d API keys minted for one grant", after-before)
		}
	})
}

// TestRaceGrantPolls: 8 polls at once of an approved grant: the sealed
// credential is handed out exactly once.
func TestRaceGrantPolls(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		r := e.do("POST", "/v1/device/grants", "", grantBody(t))
		want(t, r, 201, "")
		id, code, poll := r.str("grant_id"), r.str("user_code"), r.str("poll_token")
		want(t, e.do("POST", "/v1/device/grants/approve", owner, map[string]string{"user_code": code}), 200, "")
		delivered := make([]bool, 8)
		count := raceStatuses(len(delivered), func(i int) int {
			r := e.do("GET", "/v1/device/grants/"+id, poll, nil)
			delivered[i] = r.str("sealed_credential") != ""
			return r.status
		})
		wantCounts(t, count, map[int]int{200: 8})
		n := 0
		for _, d := range delivered {
			if d {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the credential was delivered %d times", n)
		}
	})
}

// TestRaceOpenGrantsPerAddr: 12 grants at once from one address with a
// cap of 4 open grants: exactly 4 are created.
func TestRaceOpenGrantsPerAddr(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		e := envOn(t, b, withLimits(Limits{Grant: Rate{PerAddr: Bucket{Burst: -1}, PerAccount: Bucket{Burst: -1}}, OpenGrantsPerAddr: 4}))
		count := raceStatuses(12, func(int) int {
			return e.do("POST", "/v1/device/grants", "", grantBody(t)).status
		})
		wantCounts(t, count, map[int]int{201: 4, 429: 8})
	})
}

// TestRacePendingCap: with room for 3 more pending requests on a channel,
// 10 joins at once (each with an invite of its own) queue exactly 3.
func TestRacePendingCap(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		acct, owner := e.account("acme")
		const ch = "acme/pay/agent"
		chID := e.channel(owner, ch)
		tx, err := e.s.store.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range MaxPending - 3 {
			if _, err := tx.Exec(e.s.store.b.rebind(`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at)
				VALUES (?, ?, ?, 'did:web:x', ?, 'pending', 0, 0)`), fmt.Sprint("fill-", i), chID, acct, []byte{0}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		invites := make([]string, 10)
		for i := range invites {
			invites[i] = e.invite(owner, ch, 1)
		}
		count := raceStatuses(len(invites), func(i int) int {
			return e.join(owner, ch, invites[i], fmt.Sprint("did:web:", i), []byte("kp")).status
		})
		wantCounts(t, count, map[int]int{201: 3, 429: 7})
		var pending, used int
		e.queryRow(`SELECT COUNT(*) FROM join_requests WHERE status = 'pending'`).Scan(&pending)
		e.queryRow(`SELECT COUNT(*) FROM invites WHERE uses > 0`).Scan(&used)
		if pending != MaxPending || used != 3 {
			t.Fatalf("pending %d, invites used %d", pending, used)
		}
	})
}
