package directory

// Races over HTTP, on every backend: many requests at the same moment
// that each check and change one piece of state. On SQLite the single
// writer settles them; on PostgreSQL the statements and row locks of the
// store's operations must.

import (
	"fmt"
	"sync"
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
			return e.do("POST", "/v1/seats", keys[i], e.seatBody(keys[i], "z6MkRace", fmt.Sprintf("acme/seat/s%d", i))).status
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
			if _, err := tx.Exec(e.s.store.b.Rebind(`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at)
				VALUES (?, ?, ?, 'did:web:x', ?, 'pending', 0, 0)`), fmt.Sprint("fill-", i), chID, acct, []byte{0}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		e.rebuildLedger()
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

// TestRaceClaims: 12 members claim one account's key packages at once.
// The account has two devices with 5 one-time key packages each and no
// last-resort one: exactly 5 claims win (each with one key package of
// each device), the others find no stock, and no key package is handed
// out twice.
func TestRaceClaims(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		targetID, target := e.account("globex")
		for _, dev := range []string{"laptop", "phone"} {
			want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, dev, 5, false)), 201, "")
		}
		keys := make([]string, 12)
		for i := range keys {
			var id string
			id, keys[i] = e.account("initech")
			want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": id}), 200, "")
		}
		e.relate(target, keys...)
		got := make([][]any, len(keys))
		count := raceStatuses(len(keys), func(i int) int {
			r := e.do("POST", "/v1/keypackages/claim", keys[i], map[string]string{"account_id": targetID, "channel": ch})
			got[i], _ = r.body["claims"].([]any)
			return r.status
		})
		wantCounts(t, count, map[int]int{200: 5, 404: 7})
		seen := map[string]bool{}
		for _, cs := range got {
			if cs != nil && len(cs) != 2 {
				t.Fatalf("a claim got %d key packages, want one per device", len(cs))
			}
			for _, c := range cs {
				kp := c.(map[string]any)["key_package"].(string)
				if seen[kp] {
					t.Fatalf("key package %s handed out twice", kp)
				}
				seen[kp] = true
			}
		}
		var left, claims int
		e.queryRow(`SELECT COUNT(*) FROM key_packages`).Scan(&left)
		e.queryRow(`SELECT COUNT(*) FROM key_package_claims`).Scan(&claims)
		if len(seen) != 10 || left != 0 || claims != 10 {
			t.Fatalf("%d key packages handed out, %d left, %d claims recorded", len(seen), left, claims)
		}
	})
}

// TestRaceStockCap: 10 uploads of 20 one-time key packages at once to one
// device: exactly 5 fit under the cap of 100.
func TestRaceStockCap(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, key := e.account("acme")
		count := raceStatuses(10, func(i int) int {
			return e.do("POST", "/v1/keypackages", key, e.stockUpload(key, "laptop", 20, false)).status
		})
		wantCounts(t, count, map[int]int{201: 5, 409: 5})
		var n int
		e.queryRow(`SELECT COUNT(*) FROM key_packages`).Scan(&n)
		if n != MaxStockPerDevice {
			t.Fatalf("%d key packages stored, want %d", n, MaxStockPerDevice)
		}
	})
}

// TestRaceStockDevices: 12 new devices of one account upload at once:
// exactly 10 fit under the device cap.
func TestRaceStockDevices(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, key := e.account("acme")
		count := raceStatuses(12, func(i int) int {
			return e.do("POST", "/v1/keypackages", key, e.stockUpload(key, fmt.Sprint("device ", i), 1, true)).status
		})
		wantCounts(t, count, map[int]int{201: MaxStockDevices, 409: 12 - MaxStockDevices})
		var n int
		e.queryRow(`SELECT COUNT(DISTINCT device) FROM key_packages`).Scan(&n)
		if n != MaxStockDevices {
			t.Fatalf("%d devices stored, want %d", n, MaxStockDevices)
		}
	})
}

// TestRaceInboxDelivery: one claim delivered 8 times at once: one Welcome
// reaches the inbox, the others are told it was delivered, and nobody
// becomes a member (the target's accept does that).
func TestRaceInboxDelivery(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		targetID, target := e.account("globex")
		want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 0, true)), 201, "")
		e.relate(target, owner)
		claimID := e.claim(owner, targetID, ch)[0]
		count := raceStatuses(8, func(i int) int {
			return e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": claimID, "welcome": b64(fmt.Sprint("welcome ", i))}).status
		})
		wantCounts(t, count, map[int]int{201: 1, 409: 7})
		var entries, added int
		e.queryRow(`SELECT COUNT(*) FROM inbox`).Scan(&entries)
		e.queryRow(`SELECT COUNT(*) FROM channel_events WHERE kind = 'member_added' AND account_id = ? AND channel = ?`, targetID, ch).Scan(&added)
		if entries != 1 || added != 0 {
			t.Fatalf("inbox entries %d, member_added events %d", entries, added)
		}
	})
}

// TestRaceGroupInfoEpochs: 10 members put the GroupInfo of epochs 1..10
// at once while the relay's fence is at 10: the only one kept is epoch
// 10's, and each refusal is stale_epoch naming 10.
func TestRaceGroupInfoEpochs(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		db := b.database(t)
		fe := newFencedEnv(t, func(c *Config) { c.Database = db })
		e := fe.env
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		fe.setFence(owner, ch, 10)
		keys := make([]string, 10)
		for i := range keys {
			var id string
			id, keys[i] = e.account("globex")
			want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": id}), 200, "")
		}
		var bad []string
		var mu sync.Mutex
		count := raceStatuses(len(keys), func(i int) int {
			epoch := i + 1
			r := e.do("PUT", "/v1/channels/groupinfo", keys[i], map[string]any{"channel": ch, "epoch": epoch, "group_info": b64(fmt.Sprint("gi ", epoch))})
			if ok := r.status == 200 && epoch == 10 || r.status == 409 && r.code() == "stale_epoch" && r.body["epoch"] == float64(10); !ok {
				mu.Lock()
				bad = append(bad, r.String())
				mu.Unlock()
			}
			return r.status
		})
		if count[200] != 1 || count[409] != len(keys)-1 || len(bad) > 0 {
			t.Fatalf("statuses %v, bad answers %v", count, bad)
		}
		r := e.do("GET", "/v1/channels/groupinfo?channel="+ch, owner, nil)
		want(t, r, 200, "")
		if r.body["epoch"] != float64(10) || r.str("group_info") != b64("gi 10") {
			t.Fatalf("kept %s", r)
		}
	})
}

// TestRaceAutoInviteUses: 12 accounts join at once with an auto invite of
// max_uses 3: exactly 3 become members.
func TestRaceAutoInviteUses(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 3, "auto": true})
		want(t, r, 201, "")
		inv := r.str("token")
		keys := make([]string, 12)
		for i := range keys {
			_, keys[i] = e.account("globex")
		}
		bodies := make([]map[string]string, len(keys))
		for i := range keys {
			bodies[i] = e.autoJoin(keys[i], ch, inv, fmt.Sprint(i))
		}
		count := raceStatuses(len(keys), func(i int) int {
			return e.do("POST", "/v1/channels/join", keys[i], bodies[i]).status
		})
		wantWinners(t, count, 3, 9)
		var uses, members int
		e.queryRow(`SELECT uses FROM invites`).Scan(&uses)
		e.queryRow(`SELECT COUNT(*) FROM channel_members`).Scan(&members)
		if uses != 3 || members != 4 {
			t.Fatalf("uses %d, members %d (owner included)", uses, members)
		}
	})
}
