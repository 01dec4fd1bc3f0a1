package directory

import (
	"encoding/base64"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRemovalByIdentity: the owner ends by identity the membership of the
// account that joined by auto invite under it; strangers, members and
// the removed account itself cannot; the removed account's join with an
// invite from before its removal and its GroupInfo fetch answer 403
// removed and change nothing, while an invite made since readmits it.
func TestRemovalByIdentity(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	joinerID, joiner := e.account("initech")
	_, stranger := e.account("hooli")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 5, "auto": true})
	want(t, r, 201, "")
	old := r.str("token")
	for _, j := range []struct{ key, id string }{{member, "Member"}, {joiner, "Joiner"}} {
		want(t, e.do("POST", "/v1/channels/join", j.key, e.autoJoin(j.key, ch, old, j.id)), 201, "")
	}
	e.setFence(owner, ch, 3) // GroupInfo follows the relay's fence
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 3, "group_info": b64("gi 3")}), 200, "")

	del := func(key, identity string) reply {
		return e.do("DELETE", "/v1/channels/members?"+url.Values{"channel": {ch}, "identity": {identity}}.Encode(), key, nil)
	}
	want(t, del(stranger, tid("Joiner")), 403, "not_owner")
	want(t, del(member, tid("Joiner")), 403, "not_owner")
	want(t, del(joiner, tid("Member")), 403, "not_owner")
	r = del(owner, tid("Nobody"))
	want(t, r, 200, "")
	if ended := r.body["ended"].([]any); len(ended) != 0 {
		t.Fatalf("an identity nobody joined under: %s", r)
	}
	members := func() []string {
		r := e.do("GET", "/v1/channels/members?channel="+url.QueryEscape(ch), owner, nil)
		want(t, r, 200, "")
		var out []string
		for _, m := range r.body["members"].([]any) {
			out = append(out, m.(map[string]any)["account_id"].(string))
		}
		return out
	}
	if got := len(members()); got != 3 {
		t.Fatalf("members after refused removals: %v", members())
	}

	r = del(owner, tid("Joiner"))
	want(t, r, 200, "")
	if !reflect.DeepEqual(r.body["ended"], []any{joinerID}) || r.body["kept"] != false {
		t.Fatalf("the removal: %s", r)
	}
	if got := members(); len(got) != 2 || slices.Contains(got, joinerID) || !slices.Contains(got, memberID) {
		t.Fatalf("members after the removal: %v", got)
	}
	// Its way back through the directory is closed.
	want(t, e.do("GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(ch), joiner, nil), 403, "removed")
	want(t, e.do("POST", "/v1/channels/join", joiner, e.autoJoin(joiner, ch, old, "Joiner")), 403, "removed")
	want(t, e.do("POST", "/v1/channels/join", joiner, e.autoJoin(joiner, ch, old, "Other")), 403, "removed")
	var uses int
	if err := e.queryRow(`SELECT uses FROM invites WHERE hash = ?`, hashSecret(old)).Scan(&uses); err != nil || uses != 2 {
		t.Fatalf("the refused joins used the invite: %d %v", uses, err)
	}
	// Others are not affected, and a stranger that never was a member is
	// told it is not one.
	want(t, e.do("GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(ch), member, nil), 200, "")
	want(t, e.do("GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(ch), stranger, nil), 403, "not_a_member")

	// The owner invites it again: a new invite readmits it.
	e.clock.Advance(1)
	r = e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "auto": true})
	want(t, r, 201, "")
	want(t, e.do("POST", "/v1/channels/join", joiner, e.autoJoin(joiner, ch, r.str("token"), "Joiner2")), 201, "")
	if got := members(); len(got) != 3 || !slices.Contains(got, joinerID) {
		t.Fatalf("members after the new invite: %v", got)
	}
}

// TestRemovalByAccountIsRecorded: an account the owner removes by account
// id is recorded as removed too, and one that leaves by itself is not.
func TestRemovalByAccountIsRecorded(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	goneID, gone := e.account("globex")
	leftID, left := e.account("initech")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 5, "auto": true})
	want(t, r, 201, "")
	tok := r.str("token")
	for _, j := range []struct{ key, id string }{{gone, "Gone"}, {left, "Left"}} {
		want(t, e.do("POST", "/v1/channels/join", j.key, e.autoJoin(j.key, ch, tok, j.id)), 201, "")
	}
	want(t, e.do("DELETE", "/v1/channels/members?"+url.Values{"channel": {ch}, "account_id": {goneID}}.Encode(), owner, nil), 200, "")
	want(t, e.do("DELETE", "/v1/channels/members?"+url.Values{"channel": {ch}, "account_id": {leftID}}.Encode(), left, nil), 200, "")
	want(t, e.do("POST", "/v1/channels/join", gone, e.autoJoin(gone, ch, tok, "Gone")), 403, "removed")
	want(t, e.do("POST", "/v1/channels/join", left, e.autoJoin(left, ch, tok, "Left")), 201, "")
}

// TestInviteByTokenHash: an owner's seat registers an auto invite by the
// hash of a token it made; the answer carries no token, the directory
// stores only the hash, a join that shows the token is counted and
// admitted as with a minted one, and bad requests change nothing.
func TestInviteByTokenHash(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	_, member := e.account("globex")
	_, stranger := e.account("hooli")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	tok := "skt_inv_made-by-the-seat-0123456789abcdefghijklmnopq"
	hash := base64.StdEncoding.EncodeToString(hashSecret(tok))
	count := func() int {
		var n int
		if err := e.queryRow(`SELECT COUNT(*) FROM invites`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name string
		key  string
		body map[string]any
		code int
		err  string
	}{
		{"a stranger", stranger, map[string]any{"channel": ch, "auto": true, "token_hash": hash}, 403, "not_owner"},
		{"not auto", owner, map[string]any{"channel": ch, "token_hash": hash}, 400, "invalid_request"},
		{"not base64", owner, map[string]any{"channel": ch, "auto": true, "token_hash": "%%%"}, 400, "invalid_request"},
		{"too short", owner, map[string]any{"channel": ch, "auto": true, "token_hash": base64.StdEncoding.EncodeToString([]byte("short"))}, 400, "invalid_request"},
		{"max_uses 0", owner, map[string]any{"channel": ch, "auto": true, "token_hash": hash, "max_uses": 0}, 400, "invalid_request"},
	} {
		want(t, e.do("POST", "/v1/channels/invites", tc.key, tc.body), tc.code, tc.err)
		if n := count(); n != 0 {
			t.Fatalf("%s: %d invites stored", tc.name, n)
		}
	}
	r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "auto": true, "token_hash": hash, "max_uses": 1})
	want(t, r, 201, "")
	if !reflect.DeepEqual(r.keys(), []string{"expires_at"}) {
		t.Fatalf("the answer: %s", r)
	}
	want(t, e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "auto": true, "token_hash": hash}), 409, "invite_exists")
	r = e.do("POST", "/v1/channels/join", member, e.autoJoin(member, ch, tok, "Member"))
	want(t, r, 201, "")
	if r.body["auto"] != true {
		t.Fatalf("the join: %s", r)
	}
	want(t, e.do("POST", "/v1/channels/join", stranger, e.autoJoin(stranger, ch, tok, "Stranger")), 403, "invalid_invite")
}

// TestIdentityRecorded: GET /v1/channels/identities tells the owner and
// the members whether an account joined by auto invite under an identity,
// recorded before the GroupInfo is handed out, and nothing more (never the
// account); the record goes with a removal by identity and with a leave.
// A stranger gets 403 not_member, a removed member 403 removed, bad input
// 400, and nothing is stored.
func TestIdentityRecorded(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	memberID, member := e.account("globex")
	_, joiner := e.account("initech")
	_, stranger := e.account("hooli")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	e.setFence(owner, ch, 1)
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 1, "group_info": b64("gi 1")}), 200, "")
	r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 5, "auto": true})
	want(t, r, 201, "")
	tok := r.str("token")
	for _, j := range []struct{ key, id string }{{member, "Member"}, {joiner, "Joiner"}} {
		r := e.do("POST", "/v1/channels/join", j.key, e.autoJoin(j.key, ch, tok, j.id))
		want(t, r, 201, "")
		if r.str("group_info") == "" {
			t.Fatalf("the join handed out no GroupInfo: %s", r)
		}
	}
	get := func(key, identity string) reply {
		return e.do("GET", "/v1/channels/identities?"+url.Values{"channel": {ch}, "identity": {identity}}.Encode(), key, nil)
	}
	recorded := func(key, identity string) bool {
		t.Helper()
		r := get(key, identity)
		want(t, r, 200, "")
		if _, ok := r.body["account_id"]; ok {
			t.Fatalf("the answer names an account: %s", r)
		}
		return r.body["recorded"] == true
	}
	before := e.snapshot()
	for _, key := range []string{owner, member, joiner} {
		if !recorded(key, tid("Joiner")) || !recorded(key, tid("Member")) || recorded(key, tid("Nobody")) {
			t.Fatalf("the records as %s sees them are wrong", key)
		}
	}
	want(t, get(stranger, tid("Joiner")), 403, "not_member")
	want(t, get(owner, ""), 400, "invalid_request")
	want(t, get(owner, strings.Repeat("x", 257)), 400, "invalid_request")
	want(t, e.do("GET", "/v1/channels/identities?"+url.Values{"channel": {"acme/rooms/none"}, "identity": {tid("Joiner")}}.Encode(), owner, nil), 404, "channel_not_found")
	if e.snapshot() != before {
		t.Fatal("a read changed the database")
	}

	// A removal by identity drops the record; the removed account is told
	// it was removed.
	want(t, e.do("DELETE", "/v1/channels/members?"+url.Values{"channel": {ch}, "identity": {tid("Joiner")}}.Encode(), owner, nil), 200, "")
	if recorded(owner, tid("Joiner")) {
		t.Fatal("the record outlived the removal")
	}
	want(t, get(joiner, tid("Member")), 403, "removed")
	// A leave drops the leaver's records.
	want(t, e.do("DELETE", "/v1/channels/members?"+url.Values{"channel": {ch}, "account_id": {memberID}}.Encode(), member, nil), 200, "")
	if recorded(owner, tid("Member")) {
		t.Fatal("the record outlived the leave")
	}
}
