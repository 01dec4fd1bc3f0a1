package directory

// Consent, attacked: outsiders draining a person's join offers, a crowd
// of related accounts using them up, and offers published under someone
// else's identity.

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// oneTimeLeft is how many one-time offers key's account holds in all.
func (e *env) oneTimeLeft(key string) int {
	e.t.Helper()
	r := e.do("GET", "/v1/keypackages", key, nil)
	want(e.t, r, 200, "")
	n := 0
	for _, d := range r.body["devices"].([]any) {
		n += int(d.(map[string]any)["one_time"].(float64))
	}
	return n
}

// TestConsentOutsiderCannotDrain: an account that owns a channel but
// shares no room or org with the target claims by account id and by
// identity, a hundred times: every claim is 403 not_allowed, the same
// answer as for an identity nobody registered, and the target's stock is
// untouched. With an add-token of the target it may claim, as many times
// as the token has uses, until it is revoked; the token's list holds no
// secret.
func TestConsentOutsiderCannotDrain(t *testing.T) {
	e := newEnv(t, nil)
	targetID, target := e.account("globex")
	_, outsider := e.account("hooli")
	const ch = "hooli/pay/agent"
	e.channel(outsider, ch)
	for range 10 {
		want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 10, true)), 201, "")
	}
	did := e.person(target).did
	before := e.snapshot()
	for i := range 100 {
		var body map[string]string
		switch i % 3 {
		case 0:
			body = map[string]string{"account_id": targetID, "channel": ch}
		case 1:
			body = map[string]string{"identity": did, "channel": ch}
		default:
			body = map[string]string{"identity": e.dev(target, "laptop"), "channel": ch}
		}
		r := e.do("POST", "/v1/keypackages/claim", outsider, body)
		want(t, r, 403, "not_allowed")
		nobody := e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"identity": "did:key:z6MkNobody" + fmt.Sprint(i), "channel": ch})
		if nobody.status != r.status || nobody.code() != r.code() || nobody.str("message") != r.str("message") {
			t.Fatalf("a registered identity answers %s, an unknown one %s", r, nobody)
		}
	}
	if e.snapshot() != before || e.oneTimeLeft(target) != MaxStockPerDevice {
		t.Fatal("refused claims changed the target's stock")
	}

	// An add-token of the target, two uses.
	r := e.do("POST", "/v1/contacts/tokens", target, map[string]any{"max_uses": 2, "ttl_seconds": 3600})
	want(t, r, 201, "")
	tok, tokID := r.str("token"), r.str("id")
	if !strings.HasPrefix(tok, "skt_add_") || r.body["max_uses"] != float64(2) || r.str("expires_at") == "" {
		t.Fatalf("token answer %s", r)
	}
	var stored int
	e.queryRow(`SELECT COUNT(*) FROM add_tokens WHERE hash = ?`, hashSecret(tok)).Scan(&stored)
	if stored != 1 || strings.Contains(e.snapshot(), tok) {
		t.Fatal("the add-token is not stored as its hash only")
	}
	// Another person's token, or a made-up one, does nothing.
	_, other := e.account("initech")
	otherTok := e.do("POST", "/v1/contacts/tokens", other, nil).str("token")
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"account_id": targetID, "channel": ch, "add_token": otherTok}), 403, "not_allowed")
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"account_id": targetID, "channel": ch, "add_token": "skt_add_nope"}), 403, "not_allowed")
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"account_id": targetID, "channel": ch, "add_token": "sk_live_x"}), 400, "invalid_request")
	// By account, then by the token alone (which names its maker).
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"account_id": targetID, "channel": ch, "add_token": tok}), 200, "")
	r = e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"channel": ch, "add_token": tok})
	want(t, r, 200, "")
	if len(r.body["claims"].([]any)) != 1 {
		t.Fatalf("claim by token %s", r)
	}
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"channel": ch, "add_token": tok}), 403, "invalid_add_token")
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"account_id": targetID, "channel": ch, "add_token": tok}), 403, "not_allowed")
	if n := e.oneTimeLeft(target); n != MaxStockPerDevice-2 {
		t.Fatalf("%d one-time offers left, want %d", n, MaxStockPerDevice-2)
	}
	// The list: the caller's own, no secrets; revoking ends a token at once.
	r = e.do("GET", "/v1/contacts/tokens", target, nil)
	want(t, r, 200, "")
	toks := r.body["tokens"].([]any)
	if len(toks) != 1 || toks[0].(map[string]any)["id"] != tokID || toks[0].(map[string]any)["uses"] != float64(2) || strings.Contains(string(r.raw), "skt_add_") {
		t.Fatalf("token list %s", r)
	}
	fresh := e.do("POST", "/v1/contacts/tokens", target, nil)
	want(t, e.do("DELETE", "/v1/contacts/tokens/"+fresh.str("id"), outsider, nil), 404, "not_found")
	want(t, e.do("DELETE", "/v1/contacts/tokens/"+fresh.str("id"), target, nil), 204, "")
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"channel": ch, "add_token": fresh.str("token")}), 403, "invalid_add_token")
	// Bad ranges change nothing.
	want(t, e.do("POST", "/v1/contacts/tokens", target, map[string]any{"max_uses": 0}), 400, "invalid_request")
	want(t, e.do("POST", "/v1/contacts/tokens", target, map[string]any{"ttl_seconds": 1}), 400, "invalid_request")
	// A token expires.
	late := e.do("POST", "/v1/contacts/tokens", target, map[string]any{"ttl_seconds": 60}).str("token")
	e.clock.Advance(61 * time.Second)
	want(t, e.do("POST", "/v1/keypackages/claim", outsider, map[string]string{"channel": ch, "add_token": late}), 403, "invalid_add_token")
	// The number of live tokens is bounded.
	for i := 0; ; i++ {
		r := e.do("POST", "/v1/contacts/tokens", target, nil)
		if r.status == 429 {
			want(t, r, 429, "too_many_add_tokens")
			break
		}
		want(t, r, 201, "")
		if i > MaxAddTokens {
			t.Fatal("no bound on add-tokens")
		}
	}
}

// TestConsentCrowdShare: eight accounts that share a room with the target
// claim its one device's offers twenty times each within an hour: none
// takes more than ClaimsPerClaimer one-time offers, all together no more
// than ClaimsPerDevice, and every other claim is answered with the
// last-resort offer. An hour later one-time offers are handed out again.
func TestConsentCrowdShare(t *testing.T) {
	e := newEnv(t, nil)
	targetID, target := e.account("globex")
	for range 10 {
		want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 10, true)), 201, "")
	}
	crowd := make([]string, 8)
	for i := range crowd {
		_, crowd[i] = e.account(fmt.Sprint("crowd", i))
		e.channel(crowd[i], fmt.Sprintf("crowd%d/a/b", i))
	}
	e.relate(target, crowd...)
	oneTime := map[int]int{}
	for round := range 20 {
		for i, key := range crowd {
			r := e.do("POST", "/v1/keypackages/claim", key, map[string]string{"account_id": targetID, "channel": fmt.Sprintf("crowd%d/a/b", i)})
			want(t, r, 200, "")
			c := r.body["claims"].([]any)[0].(map[string]any)
			if c["last_resort"] == false {
				oneTime[i]++
			} else if kp, _ := base64.StdEncoding.DecodeString(c["key_package"].(string)); !strings.HasPrefix(string(kp), "lr ") {
				t.Fatalf("round %d: a last-resort claim answered %q", round, kp)
			}
		}
	}
	total := 0
	for i, n := range oneTime {
		if n > ClaimsPerClaimer {
			t.Fatalf("claimer %d took %d one-time offers in an hour", i, n)
		}
		total += n
	}
	if total != ClaimsPerDevice || e.oneTimeLeft(target) != MaxStockPerDevice-ClaimsPerDevice {
		t.Fatalf("the crowd took %d one-time offers in an hour (%d left), want %d", total, e.oneTimeLeft(target), ClaimsPerDevice)
	}
	e.clock.Advance(claimWindow + time.Second)
	r := e.do("POST", "/v1/keypackages/claim", crowd[0], map[string]string{"account_id": targetID, "channel": "crowd0/a/b"})
	want(t, r, 200, "")
	if r.body["claims"].([]any)[0].(map[string]any)["last_resort"] != false {
		t.Fatalf("an hour later: %s", r)
	}
}

// TestConsentSquatting: an attacker uploads offers as a "device" of the
// victim's did:key, or as the victim's did:key itself, or registers the
// victim's did:key as a seat of its own: all refused, with nothing
// stored; a claim by the victim's identity then answers the victim's own
// offers only. A device identity whose certificate does not match its
// device key is refused too.
func TestConsentSquatting(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	_, victim := e.account("globex")
	_, attacker := e.account("hooli")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	e.relate(victim, owner)
	vdid := e.person(victim).did
	adid := e.person(attacker).did
	_, vkey := e.person(victim).device("laptop")
	before := e.snapshot()
	for _, body := range []map[string]any{
		stockUpload(vdid+"#evil", 5, true),
		stockUpload(vdid, 5, true),
		stockUpload(e.dev(victim, "laptop"), 5, true),
		func() map[string]any {
			b := stockUpload(e.dev(victim, "laptop"), 5, true)
			b["device_key"] = base64.StdEncoding.EncodeToString(vkey)
			return b
		}(),
		func() map[string]any { // the attacker's certificate, the victim's name
			id, k := e.person(attacker).device("laptop")
			b := stockUpload(vdid+id[len(adid):], 5, true)
			b["device_key"] = base64.StdEncoding.EncodeToString(k)
			return b
		}(),
		func() map[string]any { // the attacker's own device, someone else's device key
			id, _ := e.person(attacker).device("laptop")
			b := stockUpload(id, 5, true)
			b["device_key"] = base64.StdEncoding.EncodeToString(vkey)
			return b
		}(),
	} {
		r := e.do("POST", "/v1/keypackages", attacker, body)
		want(t, r, 403, "identity_not_yours")
	}
	// Registering the victim's did:key needs the victim's key.
	stolen := newTestPerson("victim's")
	stolen.did = vdid
	want(t, e.do("POST", "/v1/seats", attacker, stolen.seatBody(mustID(t, e, attacker), "hooli/tally/x")), 403, "invalid_proof")
	if e.snapshot() != before {
		t.Fatal("a refused upload changed the store")
	}
	// The victim's own offers still answer a claim by its identity.
	want(t, e.do("POST", "/v1/keypackages", victim, e.stockUpload(victim, "laptop", 1, true)), 201, "")
	r := e.do("POST", "/v1/keypackages/claim", owner, map[string]string{"identity": vdid, "channel": ch})
	want(t, r, 200, "")
	cs := r.body["claims"].([]any)
	if len(cs) != 1 || cs[0].(map[string]any)["device"] != e.dev(victim, "laptop") {
		t.Fatalf("claim by the victim's identity: %s", r)
	}
}
