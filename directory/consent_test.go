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

// deliverTo claims target's offers as key for ch and leaves a Welcome of
// size bytes for the first claim; it returns the answer.
func (e *env) deliverTo(key, targetID, ch string, size int) reply {
	e.t.Helper()
	ids := e.claim(key, targetID, ch)
	return e.do("POST", "/v1/inbox", key, map[string]string{"claim_id": ids[0], "welcome": base64.StdEncoding.EncodeToString(make([]byte, size))})
}

// TestConsentInboxFlood: eight strangers cannot put anything in a
// person's inbox (they cannot claim); three accounts that share a room
// with the person flood it with the largest Welcomes and each stops at its
// share (429 quota_exceeded); the person's real Welcome from the room's
// owner still gets in.
func TestConsentInboxFlood(t *testing.T) {
	e := newEnv(t, nil)
	targetID, target := e.account("globex")
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 0, true)), 201, "")
	for i := range 8 {
		_, s := e.account(fmt.Sprint("stranger", i))
		ch := fmt.Sprintf("stranger%d/a/b", i)
		e.channel(s, ch)
		want(t, e.do("POST", "/v1/keypackages/claim", s, map[string]string{"account_id": targetID, "channel": ch}), 403, "not_allowed")
	}
	flooders := make([]string, 3)
	for i := range flooders {
		_, flooders[i] = e.account(fmt.Sprint("flood", i))
		e.channel(flooders[i], fmt.Sprintf("flood%d/a/b", i))
	}
	e.relate(target, flooders...)
	for i, f := range flooders {
		sent := 0
		for ; ; sent++ {
			r := e.deliverTo(f, targetID, fmt.Sprintf("flood%d/a/b", i), MaxWelcome)
			if r.status != 201 {
				want(t, r, 429, "quota_exceeded")
				break
			}
		}
		if sent*MaxWelcome > MaxInboxSenderBytes || sent == 0 {
			t.Fatalf("flooder %d put %d Welcomes of %d bytes", i, sent, MaxWelcome)
		}
	}
	_, owner := e.account("acme")
	e.channel(owner, "acme/pay/agent")
	e.relate(target, owner)
	want(t, e.deliverTo(owner, targetID, "acme/pay/agent", 4096), 201, "")
}

// TestConsentDeliveryIsNotMembership: a delivered Welcome makes nobody a
// member; the person's accept does, once; a declined entry is gone and
// the sender sees nothing of it. A stranger cannot accept or decline the
// person's entries.
func TestConsentDeliveryIsNotMembership(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	targetID, target := e.account("globex")
	_, stranger := e.account("hooli")
	const ch, other = "acme/pay/agent", "acme/pay/other"
	e.channel(owner, ch)
	e.channel(owner, other)
	e.relate(target, owner)
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 2, true)), 201, "")
	r := e.deliverTo(owner, targetID, ch, 100)
	want(t, r, 201, "")
	entry := r.str("id")
	r = e.deliverTo(owner, targetID, other, 100)
	want(t, r, 201, "")
	declined := r.str("id")
	want(t, e.do("GET", "/v1/channels/members?channel="+ch, target, nil), 403, "not_member")
	before := e.snapshot()
	want(t, e.do("POST", "/v1/inbox/"+entry+"/accept", stranger, nil), 404, "not_found")
	want(t, e.do("POST", "/v1/inbox/"+entry+"/accept", owner, nil), 404, "not_found")
	want(t, e.do("DELETE", "/v1/inbox/"+entry, stranger, nil), 404, "not_found")
	if e.snapshot() != before {
		t.Fatal("a refused accept changed the store")
	}
	r = e.do("POST", "/v1/inbox/"+entry+"/accept", target, nil)
	want(t, r, 200, "")
	if r.str("channel") != ch {
		t.Fatalf("accept answer %s", r)
	}
	want(t, e.do("POST", "/v1/inbox/"+entry+"/accept", target, nil), 404, "not_found")
	want(t, e.do("GET", "/v1/channels/members?channel="+ch, target, nil), 200, "")
	// Declined: dropped, no membership, nothing the sender can see.
	want(t, e.do("DELETE", "/v1/inbox/"+declined, target, nil), 204, "")
	want(t, e.do("GET", "/v1/channels/members?channel="+other, target, nil), 403, "not_member")
	if r := e.do("GET", "/v1/inbox", target, nil); len(r.body["entries"].([]any)) != 0 {
		t.Fatalf("inbox after accept and decline: %s", r)
	}
}

// TestConsentInboxPaged: an inbox of 30 of the largest Welcomes is read in
// pages of at most 4 MiB of Welcomes, each with has_more and the cursor
// for the next, and all of them once.
func TestConsentInboxPaged(t *testing.T) {
	e := newEnv(t, nil)
	targetID, target := e.account("globex")
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 0, true)), 201, "")
	senders := make([]string, 3)
	for i := range senders {
		_, senders[i] = e.account(fmt.Sprint("sender", i))
		e.channel(senders[i], fmt.Sprintf("sender%d/a/b", i))
	}
	e.relate(target, senders...)
	total := 0
	for i, s := range senders {
		for range MaxInboxSenderBytes / MaxWelcome {
			want(t, e.deliverTo(s, targetID, fmt.Sprintf("sender%d/a/b", i), MaxWelcome), 201, "")
			total++
		}
	}
	seen := map[string]bool{}
	after := ""
	for pages := 0; ; pages++ {
		r := e.do("GET", "/v1/inbox?after="+after, target, nil)
		want(t, r, 200, "")
		entries := r.body["entries"].([]any)
		bytes := 0
		for _, en := range entries {
			w, _ := base64.StdEncoding.DecodeString(en.(map[string]any)["welcome"].(string))
			bytes += len(w)
			seen[en.(map[string]any)["id"].(string)] = true
		}
		if bytes > maxInboxPageBytes || len(entries) == 0 {
			t.Fatalf("page %d: %d entries, %d bytes of Welcomes", pages, len(entries), bytes)
		}
		if r.body["has_more"] != true {
			break
		}
		after = r.str("next")
		if pages > total {
			t.Fatal("the pages do not end")
		}
	}
	if len(seen) != total {
		t.Fatalf("read %d entries of %d", len(seen), total)
	}
	want(t, e.do("GET", "/v1/inbox?after=x", target, nil), 400, "invalid_request")
}

// FuzzCheckDeviceName: the check of a stock device name never panics, and
// what it accepts names a person whose did:key parses, and is that did:key
// or a device identity of it whose signature verifies over the device key.
func FuzzCheckDeviceName(f *testing.F) {
	p := newTestPerson("fuzz")
	id, key := p.device("laptop")
	f.Add(p.did, []byte(nil))
	f.Add(id, []byte(key))
	f.Add(id, []byte(nil))
	f.Add(p.did+"#evil", []byte(key))
	f.Add("did:key:z6Mk", []byte{1})
	f.Add("did:key:z6Mk#dev:z", []byte{})
	f.Fuzz(func(t *testing.T, device string, deviceKey []byte) {
		person, err := checkDeviceName(device, deviceKey)
		if err != nil {
			return
		}
		if _, err := parseDIDKey(person); err != nil || !strings.HasPrefix(device, person) {
			t.Fatalf("accepted %q as a device of %q", device, person)
		}
		if device != person && !strings.HasPrefix(device, person+deviceMark) {
			t.Fatalf("accepted %q, neither %q nor a device of it", device, person)
		}
	})
}

// TestConsentEndsWithTheRelationship: an account allowed to claim because
// it shared a channel with the person may not claim once the person
// removed it from that channel.
func TestConsentEndsWithTheRelationship(t *testing.T) {
	e := newEnv(t, nil)
	targetID, target := e.account("globex")
	claimerID, claimer := e.account("hooli")
	const ch = "hooli/pay/agent"
	e.channel(claimer, ch)
	e.channel(target, "globex/shared/room")
	want(t, e.do("POST", "/v1/channels/members", target, map[string]string{"channel": "globex/shared/room", "account_id": claimerID}), 200, "")
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 5, true)), 201, "")
	want(t, e.do("POST", "/v1/keypackages/claim", claimer, map[string]string{"account_id": targetID, "channel": ch}), 200, "")
	want(t, e.do("DELETE", "/v1/channels/members?channel=globex/shared/room&account_id="+claimerID, target, nil), 200, "")
	want(t, e.do("POST", "/v1/keypackages/claim", claimer, map[string]string{"account_id": targetID, "channel": ch}), 403, "not_allowed")
}

// TestPendingPaged: 120 pending requests with the largest key packages are
// read in pages of at most 50 (3.2 MiB of key packages), each with
// has_more and the cursor of the next, all of them once and in order.
func TestPendingPaged(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		_, joiner := e.account("globex")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		kp := make([]byte, MaxKeyPackage)
		var ids []string
		var invs []string
		for range 2 {
			invs = append(invs, e.invite(owner, ch, 100))
		}
		for i := range 120 {
			r := e.join(joiner, ch, invs[i/100], fmt.Sprint("did:web:j", i), kp)
			want(t, r, 201, "")
			ids = append(ids, r.str("request_id"))
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			r := e.do("GET", "/v1/channels/pending?channel="+ch+"&after="+after, owner, nil)
			want(t, r, 200, "")
			reqs := r.body["requests"].([]any)
			if len(reqs) == 0 || len(reqs) > maxPendingListed {
				t.Fatalf("page %d: %d requests", pages, len(reqs))
			}
			for _, q := range reqs {
				got = append(got, q.(map[string]any)["id"].(string))
			}
			if r.body["has_more"] != true {
				break
			}
			after = r.str("next")
			if pages > 10 {
				t.Fatal("the pages do not end")
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("read %d requests, want the %d in order", len(got), len(ids))
		}
		want(t, e.do("GET", "/v1/channels/pending?channel="+ch+"&after=x", owner, nil), 400, "invalid_request")
	})
}
