package directory

// Rooms that work when their owner is away, over HTTP: the key-package
// stock and its claims, the Welcome inbox, the GroupInfo kept per
// channel, and auto invites.

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// stockSerial numbers the key packages tests upload, so no two are alike.
var stockSerial struct {
	sync.Mutex
	n int
}

// stockUpload is the body of POST /v1/keypackages with n one-time key
// packages for device (and a last-resort one if lastResort), each
// distinct across calls.
func stockUpload(device string, n int, lastResort bool) map[string]any {
	stockSerial.Lock()
	defer stockSerial.Unlock()
	body := map[string]any{"device": device, "key_packages": []string{}}
	kps := []string{}
	for range n {
		stockSerial.n++
		kps = append(kps, b64(fmt.Sprintf("kp %s %d", device, stockSerial.n)))
	}
	body["key_packages"] = kps
	if lastResort {
		stockSerial.n++
		body["last_resort"] = b64(fmt.Sprintf("lr %s %d", device, stockSerial.n))
	}
	return body
}

// claim claims targetID's key packages for channel with key and returns
// the claim ids.
func (e *env) claim(key, targetID, channel string) []string {
	e.t.Helper()
	r := e.do("POST", "/v1/keypackages/claim", key, map[string]string{"account_id": targetID, "channel": channel})
	want(e.t, r, 200, "")
	var ids []string
	for _, c := range r.body["claims"].([]any) {
		ids = append(ids, c.(map[string]any)["claim_id"].(string))
	}
	return ids
}

// keys returns the sorted keys of an answer's body.
func (r reply) keys() []string {
	var ks []string
	for k := range r.body {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestAwayStrangersChangeNothing: every new endpoint refuses strangers,
// claimers of another's claim, replays, floods past the caps and epoch
// regressions with the exact answer, and the store is unchanged after
// each refusal.
func TestAwayStrangersChangeNothing(t *testing.T) {
	fe := newFencedEnv(t, nil)
	e := fe.env
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	targetID, target := e.account("initech")
	strangerID, stranger := e.account("hooli")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": memberID}), 200, "")
	e.relate(target, owner)
	fe.setFence(owner, ch, 3)
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 3, true)), 201, "")
	claimA := e.claim(owner, targetID, ch)[0]
	claimB := e.claim(owner, targetID, ch)[0]
	r := e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": claimB, "welcome": b64("welcome")})
	want(t, r, 201, "")
	entry := r.str("id")
	want(t, e.do("PUT", "/v1/channels/groupinfo", member, map[string]any{"channel": ch, "epoch": 3, "group_info": b64("gi 3")}), 200, "")
	r = e.do("POST", "/v1/seats", target, e.seatBody(target, "z6MkTarget", "initech/seat/home"))
	want(t, r, 201, "")
	scoped := r.str("credential")
	manual := e.invite(owner, ch, 1)
	kp := b64("key package")

	type tc struct {
		name, method, path, auth string
		body                     any
		status                   int
		code                     string
	}
	claimOf := func(account string) map[string]string { return map[string]string{"account_id": account, "channel": ch} }
	cases := []tc{
		{"claim/stranger", "POST", "/v1/keypackages/claim", stranger, claimOf(targetID), 403, "not_a_member"},
		{"claim/unknown channel", "POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": targetID, "channel": "acme/no/such"}, 404, "channel_not_found"},
		{"claim/bad channel", "POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": targetID, "channel": "acme/a b/c"}, 400, "invalid_channel"},
		{"claim/self", "POST", "/v1/keypackages/claim", owner, claimOf(mustID(t, e, owner)), 400, "invalid_request"},
		{"claim/no account", "POST", "/v1/keypackages/claim", owner, claimOf(""), 400, "invalid_request"},
		{"claim/long account", "POST", "/v1/keypackages/claim", owner, claimOf(strings.Repeat("a", 65)), 400, "invalid_request"},
		{"claim/ghost account", "POST", "/v1/keypackages/claim", owner, claimOf("ghost"), 403, "not_allowed"},
		{"claim/unrelated account", "POST", "/v1/keypackages/claim", owner, claimOf(strangerID), 403, "not_allowed"},
		{"claim/member unrelated to the target", "POST", "/v1/keypackages/claim", member, claimOf(targetID), 403, "not_allowed"},
		{"claim/no stock", "POST", "/v1/keypackages/claim", owner, claimOf(memberID), 404, "no_key_packages"},
		{"claim/account and identity", "POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": targetID, "identity": "did:key:zX", "channel": ch}, 400, "invalid_request"},
		{"claim/long identity", "POST", "/v1/keypackages/claim", owner, map[string]string{"identity": strings.Repeat("d", 257), "channel": ch}, 400, "invalid_request"},
		{"claim/NUL identity", "POST", "/v1/keypackages/claim", owner, map[string]string{"identity": "did:key:z\x00", "channel": ch}, 400, "invalid_request"},
		{"claim/unknown identity", "POST", "/v1/keypackages/claim", owner, map[string]string{"identity": "did:key:zNobody", "channel": ch}, 403, "not_allowed"},
		{"claim/stranger by identity", "POST", "/v1/keypackages/claim", stranger, map[string]string{"identity": "did:key:zNobody", "channel": ch}, 403, "not_a_member"},
		{"claim/scoped elsewhere", "POST", "/v1/keypackages/claim", scoped, claimOf(memberID), 403, "forbidden"},
		{"inbox/stranger", "POST", "/v1/inbox", stranger, map[string]string{"claim_id": claimA, "welcome": kp}, 404, "not_found"},
		{"inbox/member, not the claimer", "POST", "/v1/inbox", member, map[string]string{"claim_id": claimA, "welcome": kp}, 404, "not_found"},
		{"inbox/the target itself", "POST", "/v1/inbox", target, map[string]string{"claim_id": claimA, "welcome": kp}, 404, "not_found"},
		{"inbox/replayed claim", "POST", "/v1/inbox", owner, map[string]string{"claim_id": claimB, "welcome": kp}, 409, "already_delivered"},
		{"inbox/unknown claim", "POST", "/v1/inbox", owner, map[string]string{"claim_id": "nope", "welcome": kp}, 404, "not_found"},
		{"inbox/no claim", "POST", "/v1/inbox", owner, map[string]string{"welcome": kp}, 400, "invalid_request"},
		{"inbox/no welcome", "POST", "/v1/inbox", owner, map[string]string{"claim_id": claimA}, 400, "invalid_request"},
		{"inbox/welcome too big", "POST", "/v1/inbox", owner, map[string]string{"claim_id": claimA, "welcome": base64.StdEncoding.EncodeToString(make([]byte, MaxWelcome+1))}, 413, "payload_too_large"},
		{"inbox/delete by stranger", "DELETE", "/v1/inbox/" + entry, stranger, nil, 404, "not_found"},
		{"inbox/delete by sender", "DELETE", "/v1/inbox/" + entry, owner, nil, 404, "not_found"},
		{"inbox/delete scoped", "DELETE", "/v1/inbox/" + entry, scoped, nil, 403, "forbidden"},
		{"inbox/list scoped", "GET", "/v1/inbox", scoped, nil, 403, "forbidden"},
		{"ack/stranger", "DELETE", "/v1/keypackages/claims?through=" + claimA, stranger, nil, 404, "not_found"},
		{"ack/claimer", "DELETE", "/v1/keypackages/claims?through=" + claimA, owner, nil, 404, "not_found"},
		{"ack/no through", "DELETE", "/v1/keypackages/claims", target, nil, 400, "invalid_request"},
		{"ack/unknown", "DELETE", "/v1/keypackages/claims?through=nope", target, nil, 404, "not_found"},
		{"ack/scoped", "DELETE", "/v1/keypackages/claims?through=" + claimA, scoped, nil, 403, "forbidden"},
		{"stock/list scoped", "GET", "/v1/keypackages", scoped, nil, 403, "forbidden"},
		{"stock/scoped", "POST", "/v1/keypackages", scoped, stockUpload("laptop", 1, false), 403, "forbidden"},
		{"stock/past the device cap", "POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", MaxStockPerDevice, false), 409, "stock_full"},
		{"stock/over 100 at once", "POST", "/v1/keypackages", stranger, e.stockUpload(stranger, "new", MaxStockPerDevice+1, false), 409, "stock_full"},
		{"stock/no device", "POST", "/v1/keypackages", target, stockUpload("", 1, false), 400, "invalid_request"},
		{"stock/long device", "POST", "/v1/keypackages", target, stockUpload(strings.Repeat("d", MaxDevice+1), 1, false), 400, "invalid_request"},
		{"stock/NUL device", "POST", "/v1/keypackages", target, stockUpload("a\x00b", 1, false), 400, "invalid_request"},
		{"stock/empty key package", "POST", "/v1/keypackages", target, map[string]any{"device": "d", "key_packages": []string{""}}, 400, "invalid_request"},
		{"stock/key package too big", "POST", "/v1/keypackages", target, map[string]any{"device": "d", "key_packages": []string{base64.StdEncoding.EncodeToString(make([]byte, MaxKeyPackage+1))}}, 413, "payload_too_large"},
		{"stock/last resort too big", "POST", "/v1/keypackages", target, map[string]any{"device": "d", "last_resort": base64.StdEncoding.EncodeToString(make([]byte, MaxKeyPackage+1))}, 413, "payload_too_large"},
		{"stock/bad base64", "POST", "/v1/keypackages", target, map[string]any{"device": "d", "key_packages": []string{"YQ"}}, 400, "invalid_base64"},
		{"stock/bad last resort", "POST", "/v1/keypackages", target, map[string]any{"device": "d", "last_resort": "not base64!"}, 400, "invalid_base64"},
		{"groupinfo/stranger put", "PUT", "/v1/channels/groupinfo", stranger, map[string]any{"channel": ch, "epoch": 9, "group_info": kp}, 403, "not_a_member"},
		{"groupinfo/stranger get", "GET", "/v1/channels/groupinfo?channel=" + url.QueryEscape(ch), stranger, nil, 403, "not_a_member"},
		{"groupinfo/regression", "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 2, "group_info": kp}, 409, "stale_epoch"},
		{"groupinfo/no epoch", "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "group_info": kp}, 400, "invalid_request"},
		{"groupinfo/negative epoch", "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": -1, "group_info": kp}, 400, "invalid_json"},
		{"groupinfo/epoch past int64", "PUT", "/v1/channels/groupinfo", owner, fmt.Sprintf(`{"channel":%q,"epoch":%d,"group_info":%q}`, ch, uint64(math.MaxInt64)+1, kp), 400, "invalid_request"},
		{"groupinfo/empty", "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 9, "group_info": ""}, 400, "invalid_request"},
		{"groupinfo/too big", "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 9, "group_info": base64.StdEncoding.EncodeToString(make([]byte, MaxGroupInfo+1))}, 413, "payload_too_large"},
		{"groupinfo/unknown channel", "GET", "/v1/channels/groupinfo?channel=acme/no/such", owner, nil, 404, "channel_not_found"},
		{"groupinfo/scoped elsewhere", "GET", "/v1/channels/groupinfo?channel=" + url.QueryEscape(ch), scoped, nil, 403, "forbidden"},
		{"invite/auto by a member", "POST", "/v1/channels/invites", member, map[string]any{"channel": ch, "auto": true}, 403, "not_owner"},
		{"invite/auto not a bool", "POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "auto": "yes"}, 400, "invalid_json"},
		{"join/manual invite, no key package", "POST", "/v1/channels/join", stranger, map[string]string{"channel": ch, "token": manual, "identity": "did:key:z"}, 400, "invalid_request"},
		{"join/no invite, no key package", "POST", "/v1/channels/join", stranger, map[string]string{"channel": ch, "token": "skt_inv_x", "identity": "did:key:z"}, 403, "invalid_invite"},
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
	// The refusal of a regression names the epoch the fence is at.
	r = e.do("PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 2, "group_info": kp})
	if r.body["epoch"] != float64(3) {
		t.Fatalf("stale_epoch answer %s: want the fence's epoch 3", r)
	}
	// What a stranger reads of its own stock and inbox shows nothing of
	// anyone else's.
	r = e.do("GET", "/v1/keypackages", stranger, nil)
	want(t, r, 200, "")
	if fmt.Sprint(r.body) != "map[claims:[] devices:[] has_more:false]" {
		t.Fatalf("a stranger's stock: %s", r)
	}
	r = e.do("GET", "/v1/inbox", stranger, nil)
	want(t, r, 200, "")
	if fmt.Sprint(r.body) != "map[entries:[] has_more:false]" {
		t.Fatalf("a stranger's inbox: %s", r)
	}
}

// mustID returns the account id of an API key's account.
func mustID(t testing.TB, e *env, key string) string {
	t.Helper()
	p, _, err := e.s.store.lookupKey(t.Context(), hashSecret(key))
	if err != nil {
		t.Fatal(err)
	}
	return p.account
}

// TestAwayAddOfflinePerson: a person with two devices publishes stock and
// goes away; an admin claims both devices' key packages and leaves a
// Welcome for each; the person's next sync finds both Welcomes, the claims
// on its stock, and its membership.
func TestAwayAddOfflinePerson(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	personID, person := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	e.relate(person, owner)
	laptop, phone := e.dev(person, "laptop"), e.dev(person, "phone")
	r := e.do("POST", "/v1/keypackages", person, e.stockUpload(person, "laptop", 2, true))
	want(t, r, 201, "")
	if r.body["one_time"] != float64(2) || r.body["last_resort"] != true {
		t.Fatalf("upload answer %s", r)
	}
	want(t, e.do("POST", "/v1/keypackages", person, e.stockUpload(person, "phone", 0, true)), 201, "")
	// A JWT works as well as the API key.
	jwt := e.jwt(person, nil)
	r = e.do("GET", "/v1/keypackages", jwt, nil)
	want(t, r, 200, "")
	wantDevices := []any{
		map[string]any{"device": laptop, "one_time": float64(2), "last_resort": true},
		map[string]any{"device": phone, "one_time": float64(0), "last_resort": true},
	}
	if phone < laptop {
		wantDevices[0], wantDevices[1] = wantDevices[1], wantDevices[0]
	}
	if !reflect.DeepEqual(r.body["devices"], wantDevices) || len(r.body["claims"].([]any)) != 0 {
		t.Fatalf("stock %s", r)
	}

	r = e.do("POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": personID, "channel": ch})
	want(t, r, 200, "")
	claims := r.body["claims"].([]any)
	if len(claims) != 2 {
		t.Fatalf("claims %s: want one per device", r)
	}
	for _, c := range claims {
		c := c.(map[string]any)
		kp, _ := base64.StdEncoding.DecodeString(c["key_package"].(string))
		wantLR := c["device"] == phone
		if c["last_resort"] != wantLR || !strings.HasPrefix(string(kp), map[bool]string{true: "lr ", false: "kp "}[wantLR]+c["device"].(string)) {
			t.Fatalf("claim %v (key package %q)", c, kp)
		}
		r := e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": c["claim_id"].(string), "welcome": b64("welcome for " + c["device"].(string))})
		want(t, r, 201, "")
		if r.str("id") == "" {
			t.Fatalf("delivery answer %s", r)
		}
	}

	// The person's next sync.
	r = e.do("GET", "/v1/inbox", person, nil)
	want(t, r, 200, "")
	entries := r.body["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("inbox %s", r)
	}
	ownerID := mustID(t, e, owner)
	for _, en := range entries {
		en := en.(map[string]any)
		if en["channel"] != ch || en["from"] != ownerID || en["welcome"] != b64("welcome for "+en["device"].(string)) || en["at"] == "" {
			t.Fatalf("inbox entry %v", en)
		}
	}
	r = e.do("GET", "/v1/keypackages", person, nil)
	want(t, r, 200, "")
	seen := r.body["claims"].([]any)
	oneTime := map[string]any{}
	for _, d := range r.body["devices"].([]any) {
		oneTime[d.(map[string]any)["device"].(string)] = d.(map[string]any)["one_time"]
	}
	if len(seen) != 2 || oneTime[laptop] != float64(1) {
		t.Fatalf("stock after the claims %s", r)
	}
	for _, c := range seen {
		c := c.(map[string]any)
		if c["channel"] != ch || c["claimed_by"] != ownerID || c["at"] == "" || c["id"] == "" {
			t.Fatalf("claim seen by the person %v", c)
		}
	}
	// The deliveries made nobody a member; the person's accepts do.
	want(t, e.do("GET", "/v1/channels/members?channel="+ch, person, nil), 403, "not_member")
	for _, en := range entries {
		want(t, e.do("POST", "/v1/inbox/"+en.(map[string]any)["id"].(string)+"/accept", person, nil), 200, "")
	}
	r = e.do("GET", "/v1/channels/members?channel="+ch, person, nil)
	want(t, r, 200, "")
	if n := len(r.body["members"].([]any)); n != 2 {
		t.Fatalf("members %s", r)
	}
	evs, _, err := e.s.ChannelEventsSince(t.Context(), 0)
	must(t, err)
	added := 0
	for _, ev := range evs {
		if ev.Account == personID && ev.Kind == "member_added" && ev.Channel == ch {
			added++
		}
	}
	if added != 1 {
		t.Fatalf("%d member_added events for the person, want 1", added)
	}

	// Acknowledged claims and read entries go away.
	last := seen[len(seen)-1].(map[string]any)["id"].(string)
	want(t, e.do("DELETE", "/v1/keypackages/claims?through="+url.QueryEscape(last), person, nil), 204, "")
	r = e.do("GET", "/v1/keypackages", person, nil)
	if len(r.body["claims"].([]any)) != 0 {
		t.Fatalf("claims after the ack %s", r)
	}
	r = e.do("GET", "/v1/inbox", person, nil)
	if len(r.body["entries"].([]any)) != 0 {
		t.Fatalf("inbox after the deletes %s", r)
	}
}

// TestAwayAutoInvite: a join with an auto invite makes the joiner a member
// at once and hands it the GroupInfo once one is put; an invite without
// the flag answers as it always did.
func TestAwayAutoInvite(t *testing.T) {
	fe := newFencedEnv(t, nil)
	e := fe.env
	_, owner := e.account("acme")
	_, j1 := e.account("globex")
	_, j2 := e.account("initech")
	_, j3 := e.account("hooli")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	fe.setFence(owner, ch, 7) // the room's commits so far
	r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 5, "auto": true})
	want(t, r, 201, "")
	auto := r.str("token")

	r = e.do("POST", "/v1/channels/join", j1, e.autoJoin(j1, ch, auto, "1"))
	want(t, r, 201, "")
	if !reflect.DeepEqual(r.keys(), []string{"auto", "request_id"}) || r.body["auto"] != true {
		t.Fatalf("auto join before any GroupInfo: %s", r)
	}
	want(t, e.do("GET", "/v1/channels/groupinfo?channel="+ch, j1, nil), 404, "not_found")
	p := e.do("GET", "/v1/channels/welcome/"+r.str("request_id"), j1, nil)
	if !reflect.DeepEqual(p.body, map[string]any{"status": "completed"}) {
		t.Fatalf("poll of an auto join: %s", p)
	}
	// The joiner is a member at once: it may put the GroupInfo.
	want(t, e.do("PUT", "/v1/channels/groupinfo", j1, map[string]any{"channel": ch, "epoch": 7, "group_info": b64("gi 7")}), 200, "")
	j2body := e.autoJoin(j2, ch, auto, "2")
	j2body["key_package"] = b64("kp")
	r = e.do("POST", "/v1/channels/join", j2, j2body)
	want(t, r, 201, "")
	if r.body["auto"] != true || r.body["epoch"] != float64(7) || r.str("group_info") != b64("gi 7") {
		t.Fatalf("auto join with a GroupInfo: %s", r)
	}
	r = e.do("GET", "/v1/channels/groupinfo?channel="+ch, j2, nil)
	want(t, r, 200, "")
	if r.body["epoch"] != float64(7) || r.str("group_info") != b64("gi 7") {
		t.Fatalf("GroupInfo read back: %s", r)
	}
	pending := e.do("GET", "/v1/channels/pending?channel="+ch, owner, nil)
	if n := len(pending.body["requests"].([]any)); n != 0 {
		t.Fatalf("auto joins left %d requests pending for the owner", n)
	}

	// An invite without the flag: as before, request_id only, queued.
	manual := e.invite(owner, ch, 1)
	r = e.join(j3, ch, manual, "did:key:z3", []byte("kp"))
	want(t, r, 201, "")
	if !reflect.DeepEqual(r.keys(), []string{"request_id"}) {
		t.Fatalf("manual join answer %s", r)
	}
	want(t, e.do("GET", "/v1/channels/groupinfo?channel="+ch, j3, nil), 403, "not_a_member")
}

// TestAwayClaimRateLimit: claims drain someone else's stock, so a caller
// gets 30 of them in a burst and then 429 with a Retry-After.
func TestAwayClaimRateLimit(t *testing.T) {
	e := newEnv(t, withLimits(Limits{}))
	_, owner := e.account("acme")
	targetID, target := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	e.relate(target, owner)
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 0, true)), 201, "")
	for i := range DefaultLimits.Claim.PerAccount.Burst {
		r := e.do("POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": targetID, "channel": ch})
		if r.status != 200 {
			t.Fatalf("claim %d: %s", i, r)
		}
	}
	r := e.do("POST", "/v1/keypackages/claim", owner, map[string]string{"account_id": targetID, "channel": ch})
	want(t, r, 429, "rate_limited")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
}

// TestAwayUpgrade opens a database written before auto invites existed:
// its invites stay owner-admits invites, and a join with one still needs
// a key package and queues for the owner.
func TestAwayUpgrade(t *testing.T) {
	path, db := oldDatabase(t, len(sqliteMigrations)-1)
	for _, q := range []string{
		`INSERT INTO accounts (id, email, org, created_at) VALUES ('owner', 'o@acme.example', 'acme', 1), ('joiner', 'j@globex.example', 'globex', 1)`,
		`INSERT INTO orgs (name, owner_id, created_at) VALUES ('acme', 'owner', 1), ('globex', 'joiner', 1)`,
		`INSERT INTO api_keys (hash, account_id, channel, created_at) VALUES (x'` + fmt.Sprintf("%x", hashSecret("sk_live_joiner")) + `', 'joiner', '', 1)`,
		`INSERT INTO channels (id, name, owner_id, created_at) VALUES ('c1', 'acme/a/one', 'owner', 1)`,
		`INSERT INTO invites (hash, channel_id, max_uses, uses, expires_at, created_at) VALUES (x'` + fmt.Sprintf("%x", hashSecret("skt_inv_old")) + `', 'c1', 5, 0, 9223372036854775807, 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	c := newClock()
	e := newEnvFrom(t, Config{JWTSecret: testJWTSecret, InternalSecret: []byte(testInternalSecret), DBPath: path, Now: c.Now}, c)
	defer e.close()
	want(t, e.do("POST", "/v1/channels/join", "sk_live_joiner", map[string]string{"channel": "acme/a/one", "token": "skt_inv_old", "identity": "did:key:z"}), 400, "invalid_request")
	r := e.join("sk_live_joiner", "acme/a/one", "skt_inv_old", "did:key:z", []byte("kp"))
	want(t, r, 201, "")
	if !reflect.DeepEqual(r.keys(), []string{"request_id"}) {
		t.Fatalf("join with an old invite: %s", r)
	}
}

// TestAwaySweep: the background sweep keeps inbox entries and claims for
// the inbox retention (30 days by default), then deletes them; the stock
// itself stays.
func TestAwaySweep(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepInterval = 5 * time.Millisecond })
	_, owner := e.account("acme")
	targetID, target := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	e.relate(target, owner)
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 1, true)), 201, "")
	claimID := e.claim(owner, targetID, ch)[0]
	want(t, e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": claimID, "welcome": b64("w")}), 201, "")
	count := func() (entries, claims int) {
		e.queryRow(`SELECT COUNT(*) FROM inbox`).Scan(&entries)
		e.queryRow(`SELECT COUNT(*) FROM key_package_claims`).Scan(&claims)
		return
	}
	// Past the join-request retention, well within the inbox's.
	e.clock.Advance(29 * 24 * time.Hour)
	time.Sleep(30 * time.Millisecond) // time passes: several sweeps
	if en, cl := count(); en != 1 || cl != 1 {
		t.Fatalf("%d entries, %d claims before the inbox retention passed", en, cl)
	}
	e.clock.Advance(24*time.Hour + time.Second)
	waitfor.Nil(t, 5*time.Second, func() error {
		if en, cl := count(); en != 0 || cl != 0 {
			return fmt.Errorf("sweep left %d entries, %d claims", en, cl)
		}
		return nil
	})
	r := e.do("GET", "/v1/keypackages", target, nil)
	if fmt.Sprint(r.body["devices"]) != "[map[device:"+e.dev(target, "laptop")+" last_resort:true one_time:0]]" {
		t.Fatalf("stock after the sweep %s", r)
	}
}
