package directory

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestJoinNeedsProofOfTheIdentity: a join by an auto invite names an
// identity only with the signature of that identity's member key over the
// caller's account, the channel, the identity and the token's hash. Naming
// another person's did:key, replaying someone else's proof, a proof for
// another channel or token, a made-up device of another person, and an
// old seat's join without any proof are refused and use nothing; an
// honest join, as a did:key or as a device with its certificate, is
// recorded. A join by an invite that waits for the owner needs no proof.
func TestJoinNeedsProofOfTheIdentity(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	carolID, carol := e.account("carolco")
	daveID, dave := e.account("daveco")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	e.channel(owner, "acme/rooms/other")
	r := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 5, "auto": true})
	want(t, r, 201, "")
	tok := r.str("token")
	r = e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 5, "auto": true})
	want(t, r, 201, "")
	other := r.str("token")

	cp, dp := newTestPerson("carol"), newTestPerson("dave")
	sign := func(p *testPerson, account, ch, identity, token string) string {
		return base64.StdEncoding.EncodeToString(ed25519.Sign(p.priv, JoinProof(account, ch, identity, hashSecret(token))))
	}
	body := func(identity, proof string) map[string]string {
		b := map[string]string{"channel": ch, "token": tok, "identity": identity}
		if proof != "" {
			b["proof"] = proof
		}
		return b
	}
	daveDev, daveDevKey := dp.device("phone")
	forgedDev := dp.did + deviceMark + "z" + strings.Repeat("1", 86)
	carolDev, carolDevKey := cp.device("laptop")
	devBody := func(identity string, key ed25519.PublicKey, proof string) map[string]string {
		b := body(identity, proof)
		b["device_key"] = base64.StdEncoding.EncodeToString(key)
		return b
	}
	// carol holds a key of her own, posing as a device of dave's.
	carolDevSeed := ed25519.NewKeyFromSeed(make([]byte, 32))
	before := e.snapshot()
	for _, tc := range []struct {
		name   string
		key    string
		body   map[string]string
		status int
		code   string
	}{
		{"dave's did:key, carol's signature", carol, body(dp.did, sign(cp, carolID, ch, dp.did, tok)), 403, "invalid_proof"},
		{"no proof (an old seat)", carol, body(cp.did, ""), 403, "proof_required"},
		{"dave's proof replayed by carol", carol, body(dp.did, sign(dp, daveID, ch, dp.did, tok)), 403, "invalid_proof"},
		{"a proof for another channel", carol, body(cp.did, sign(cp, carolID, "acme/rooms/other", cp.did, tok)), 403, "invalid_proof"},
		{"a proof for another token", carol, body(cp.did, sign(cp, carolID, ch, cp.did, other)), 403, "invalid_proof"},
		{"a proof for another identity", carol, body(cp.did, sign(cp, carolID, ch, dp.did, tok)), 403, "invalid_proof"},
		{"dave's real device, carol's signature", carol, devBody(daveDev, daveDevKey, sign(cp, carolID, ch, daveDev, tok)), 403, "invalid_proof"},
		{"a made-up device of dave's", carol, devBody(forgedDev, carolDevSeed.Public().(ed25519.PublicKey),
			base64.StdEncoding.EncodeToString(ed25519.Sign(carolDevSeed, JoinProof(carolID, ch, forgedDev, hashSecret(tok))))), 403, "invalid_proof"},
		{"a did:key with a device key", carol, devBody(cp.did, carolDevKey, sign(cp, carolID, ch, cp.did, tok)), 403, "invalid_proof"},
		{"not a did:key", carol, body("did:web:carol", sign(cp, carolID, ch, "did:web:carol", tok)), 403, "invalid_proof"},
		{"a short proof", carol, body(cp.did, base64.StdEncoding.EncodeToString([]byte("short"))), 403, "invalid_proof"},
		{"proof not base64", carol, body(cp.did, "!!"), 400, "invalid_base64"},
		{"device_key without proof", carol, devBody(carolDev, carolDevKey, ""), 400, "invalid_request"},
	} {
		want(t, e.do("POST", "/v1/channels/join", tc.key, tc.body), tc.status, tc.code)
		if e.snapshot() != before {
			t.Fatalf("%s: the refused join changed the database", tc.name)
		}
	}

	// Honest joins: carol as herself, dave as a device of his.
	want(t, e.do("POST", "/v1/channels/join", carol, body(cp.did, sign(cp, carolID, ch, cp.did, tok))), 201, "")
	devSeed := testDeviceSeed(dp, "phone")
	want(t, e.do("POST", "/v1/channels/join", dave, devBody(daveDev, daveDevKey,
		base64.StdEncoding.EncodeToString(ed25519.Sign(devSeed, JoinProof(daveID, ch, daveDev, hashSecret(tok)))))), 201, "")
	var ids []string
	rows, err := e.s.store.query(t.Context(), `SELECT identity FROM channel_identities ORDER BY identity`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	if want := []string{cp.did, daveDev}; !slices.Equal(ids, sorted(want)) {
		t.Fatalf("recorded identities %v, want %v", ids, want)
	}

	// An invite that waits for the owner takes a join without proof (the
	// owner's seat checks the key package), but not a wrong one.
	manual := e.invite(owner, ch, 5)
	want(t, e.join(carol, ch, manual, "did:web:carol", []byte("kp")), 201, "")
	wrong := map[string]string{"channel": ch, "token": manual, "identity": dp.did, "key_package": b64("kp"), "proof": sign(cp, carolID, ch, dp.did, manual)}
	want(t, e.do("POST", "/v1/channels/join", carol, wrong), 403, "invalid_proof")

	// A federation auto invite needs the proof too.
	r = e.do("POST", "/v1/federation/invites", owner, map[string]any{"channel": ch, "org": "carolco", "auto": true})
	want(t, r, 201, "")
	fed := r.str("token")
	want(t, e.do("POST", "/v1/channels/join", carol, map[string]string{"channel": ch, "federation_token": fed, "identity": cp.did}), 403, "proof_required")
	want(t, e.do("POST", "/v1/channels/join", carol, e.fedJoin(carol, ch, fed, "carol 2")), 201, "")
}

// testDeviceSeed is the private key of p's device called name, as
// testPerson.device derives it.
func testDeviceSeed(p *testPerson, name string) ed25519.PrivateKey {
	sum := sha256.Sum256([]byte("device " + p.did + " " + name))
	return ed25519.NewKeyFromSeed(sum[:])
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestInviteJoinsLapse: the owner lists the channel's invite-join records
// and lapses those whose identity, it says, is not in its group at the
// epoch the relay's fence stands at. A record in its grace (LapseGrace)
// stays; an older one lapses: its invite use is given back (once per
// account and invite), and the
// membership only that join made ends (a member_removed event, and the
// GroupInfo fetch is then refused as for a non-member), with no removal
// recorded, so the account may join by invite again. A membership a
// Welcome made stays, and so do the records of identities not named. A
// member, the joiner itself and a stranger can neither list nor lapse; a
// lapse at another epoch than the fence's is refused; bad input is 400;
// none of them changes anything.
func TestInviteJoinsLapse(t *testing.T) {
	e := newFencedEnv(t, nil)
	_, owner := e.account("acme")
	liarID, liar := e.account("carolco")
	honestID, honest := e.account("erinco")
	welcomedID, welcomed := e.account("frankco")
	_, stranger := e.account("hooli")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	e.setFence(owner, ch, 4)
	want(t, e.do("PUT", "/v1/channels/groupinfo", owner, putGI(ch, 4, "gi 4")), 200, "")

	// frank is a member by the owner's Welcome first.
	r := e.join(welcomed, ch, e.invite(owner, ch, 1), tid("Frank"), []byte("kp"))
	want(t, r, 201, "")
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": r.str("request_id"), "welcome": b64("w")}), 200, "")

	r = e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 3, "auto": true})
	want(t, r, 201, "")
	tok := r.str("token")
	uses := func() int {
		var n int
		if err := e.queryRow(`SELECT uses FROM invites WHERE hash = ?`, hashSecret(tok)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, j := range []struct{ key, name string }{{liar, "Carol X"}, {honest, "Erin"}, {welcomed, "Frank 2"}} {
		want(t, e.do("POST", "/v1/channels/join", j.key, e.autoJoin(j.key, ch, tok, j.name)), 201, "")
		e.clock.Advance(time.Second) // the list's order is the joins'
	}
	if uses() != 3 {
		t.Fatalf("uses after three joins: %d", uses())
	}
	members := func() []string {
		r := e.do("GET", "/v1/channels/members?channel="+url.QueryEscape(ch), owner, nil)
		want(t, r, 200, "")
		var out []string
		for _, m := range r.body["members"].([]any) {
			out = append(out, m.(map[string]any)["account_id"].(string))
		}
		slices.Sort(out)
		return out
	}

	list := func(key string) reply {
		return e.do("GET", "/v1/channels/invite-joins?channel="+url.QueryEscape(ch), key, nil)
	}
	r = list(owner)
	want(t, r, 200, "")
	joins := r.body["joins"].([]any)
	if len(joins) != 3 || r.body["has_more"] != false {
		t.Fatalf("the owner's list: %s", r)
	}
	first := joins[0].(map[string]any)
	joined, _ := time.Parse(time.RFC3339Nano, first["joined_at"].(string))
	lapses, _ := time.Parse(time.RFC3339Nano, first["lapses_at"].(string))
	if first["identity"] != tid("Carol X") || first["account_id"] != liarID || lapses.Sub(joined) != LapseGrace {
		t.Fatalf("the first record: %v", first)
	}
	before := e.snapshot()
	for _, key := range []string{liar, honest, stranger} {
		want(t, list(key), 403, "not_owner")
	}
	want(t, e.do("GET", "/v1/channels/invite-joins?channel=acme/rooms/none", owner, nil), 404, "channel_not_found")
	want(t, e.do("GET", "/v1/channels/invite-joins?channel="+url.QueryEscape(ch)+"&after=bad", owner, nil), 400, "invalid_request")

	lapse := func(key string, epoch uint64, ids ...string) reply {
		return e.do("POST", "/v1/channels/invite-joins/lapse", key, map[string]any{"channel": ch, "epoch": epoch, "identities": ids})
	}
	// In its grace, a record stays.
	r = lapse(owner, 4, tid("Carol X"))
	want(t, r, 200, "")
	if !reflect.DeepEqual(r.body["waiting"], []any{tid("Carol X")}) || len(r.body["lapsed"].([]any)) != 0 {
		t.Fatalf("a lapse in the grace: %s", r)
	}
	if e.snapshot() != before {
		t.Fatal("a lapse in the grace changed the database")
	}

	e.clock.Advance(LapseGrace + time.Second)
	for _, tc := range []struct {
		name   string
		key    string
		body   any
		status int
		code   string
	}{
		{"the liar itself", liar, map[string]any{"channel": ch, "epoch": 4, "identities": []string{tid("Carol X")}}, 403, "not_owner"},
		{"a member", honest, map[string]any{"channel": ch, "epoch": 4, "identities": []string{tid("Carol X")}}, 403, "not_owner"},
		{"a stranger", stranger, map[string]any{"channel": ch, "epoch": 4, "identities": []string{tid("Erin")}}, 403, "not_owner"},
		{"an epoch behind the fence", owner, map[string]any{"channel": ch, "epoch": 3, "identities": []string{tid("Carol X")}}, 409, "stale_epoch"},
		{"an epoch past the fence", owner, map[string]any{"channel": ch, "epoch": 5, "identities": []string{tid("Carol X")}}, 409, "epoch_not_reached"},
		{"no epoch", owner, map[string]any{"channel": ch, "identities": []string{tid("Carol X")}}, 400, "invalid_request"},
		{"no identities", owner, map[string]any{"channel": ch, "epoch": 4, "identities": []string{}}, 400, "invalid_request"},
		{"33 identities", owner, map[string]any{"channel": ch, "epoch": 4, "identities": make([]string, 33)}, 400, "invalid_request"},
		{"an empty identity", owner, map[string]any{"channel": ch, "epoch": 4, "identities": []string{""}}, 400, "invalid_request"},
		{"a long identity", owner, map[string]any{"channel": ch, "epoch": 4, "identities": []string{strings.Repeat("x", 257)}}, 400, "invalid_request"},
		{"no such channel", owner, map[string]any{"channel": "acme/rooms/none", "epoch": 4, "identities": []string{tid("Erin")}}, 404, "channel_not_found"},
	} {
		r := e.do("POST", "/v1/channels/invite-joins/lapse", tc.key, tc.body)
		want(t, r, tc.status, tc.code)
		if tc.code == "stale_epoch" && r.body["epoch"] != float64(4) {
			t.Fatalf("%s: the answer does not name the fence's epoch: %s", tc.name, r)
		}
		if e.snapshot() != before {
			t.Fatalf("%s: the refused lapse changed the database", tc.name)
		}
	}

	// The owner's group holds Erin, not Carol X nor Frank 2.
	r = lapse(owner, 4, tid("Carol X"), tid("Frank 2"), tid("Nobody"))
	want(t, r, 200, "")
	if !reflect.DeepEqual(r.body["lapsed"], []any{tid("Carol X"), tid("Frank 2")}) || !reflect.DeepEqual(r.body["ended"], []any{liarID}) ||
		len(r.body["waiting"].([]any)) != 0 {
		t.Fatalf("the lapse: %s", r)
	}
	if got := members(); slices.Contains(got, liarID) || !slices.Contains(got, honestID) || !slices.Contains(got, welcomedID) {
		t.Fatalf("members after the lapse: %v", got)
	}
	if uses() != 1 {
		t.Fatalf("uses after two lapses: %d, want 1 (the uses given back)", uses())
	}
	var kind string
	if err := e.queryRow(`SELECT kind FROM channel_events WHERE account_id = ? ORDER BY id DESC LIMIT 1`, liarID).Scan(&kind); err != nil || kind != "member_removed" {
		t.Fatalf("the liar's last channel event: %q %v", kind, err)
	}
	// Out, not removed: no GroupInfo as a non-member, and a join by the
	// invite again is taken (it would be 403 removed after a removal).
	want(t, e.do("GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(ch), liar, nil), 403, "not_a_member")
	var removals int
	e.queryRow(`SELECT COUNT(*) FROM channel_removals`).Scan(&removals)
	if removals != 0 {
		t.Fatalf("%d removals recorded by a lapse", removals)
	}
	r = list(owner)
	if joins := r.body["joins"].([]any); len(joins) != 1 || joins[0].(map[string]any)["identity"] != tid("Erin") {
		t.Fatalf("the records after the lapse: %s", r)
	}
	want(t, e.do("POST", "/v1/channels/join", liar, e.autoJoin(liar, ch, tok, "Carol X")), 201, "")
	if got := members(); !slices.Contains(got, liarID) {
		t.Fatalf("members after the lapsed joiner's new join: %v", got)
	}
	// Its grace starts again with the new join.
	r = lapse(owner, 4, tid("Carol X"))
	want(t, r, 200, "")
	if !reflect.DeepEqual(r.body["waiting"], []any{tid("Carol X")}) {
		t.Fatalf("a lapse right after a new join: %s", r)
	}
	// A second lapse of the same account's join by the same invite gives
	// no use back: joining and lapsing again and again does not make the
	// invite last.
	if uses() != 2 {
		t.Fatalf("uses after the new join: %d", uses())
	}
	e.clock.Advance(LapseGrace + time.Second)
	r = lapse(owner, 4, tid("Carol X"))
	want(t, r, 200, "")
	if !reflect.DeepEqual(r.body["lapsed"], []any{tid("Carol X")}) || !reflect.DeepEqual(r.body["ended"], []any{liarID}) {
		t.Fatalf("the second lapse: %s", r)
	}
	if uses() != 2 {
		t.Fatalf("uses after the second lapse: %d, want 2 (nothing given back)", uses())
	}
}

// TestInviteJoinsPages: the owner's list of invite-join records comes in
// pages of at most 500, each cursor going on from the last record of the
// page before, until every record was listed once.
func TestInviteJoinsPages(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	joinerID, _ := e.account("globex")
	ch := "acme/rooms/ops"
	e.channel(owner, ch)
	var chID string
	if err := e.queryRow(`SELECT id FROM channels WHERE name = ?`, ch).Scan(&chID); err != nil {
		t.Fatal(err)
	}
	const n = maxInviteJoinsListed + 20
	for i := range n {
		// Two records at each instant, so the cursor must order within one.
		if _, err := e.exec(`INSERT INTO channel_identities (channel_id, identity, account_id, added_at) VALUES (?, ?, ?, ?)`,
			chID, fmt.Sprintf("did:key:z%04d", i), joinerID, int64(1000+i/2)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		q := url.Values{"channel": {ch}}
		if after != "" {
			q.Set("after", after)
		}
		r := e.do("GET", "/v1/channels/invite-joins?"+q.Encode(), owner, nil)
		want(t, r, 200, "")
		pages++
		for _, j := range r.body["joins"].([]any) {
			id := j.(map[string]any)["identity"].(string)
			if seen[id] {
				t.Fatalf("%s listed twice", id)
			}
			seen[id] = true
		}
		if r.body["has_more"] != true {
			break
		}
		after = r.str("next")
	}
	if len(seen) != n || pages != 2 {
		t.Fatalf("%d records in %d pages, want %d in 2", len(seen), pages, n)
	}
}

// FuzzJoinProof: the check of a join's proof never panics, and accepts
// only a signature, by the identity's member key (the did:key's own, or a
// certified device key), over exactly the join it was made for.
func FuzzJoinProof(f *testing.F) {
	p := newTestPerson("fuzz")
	dev, devKey := p.device("laptop")
	hash := hashSecret("skt_inv_fuzz")
	f.Add("acct", "acme/a/b", p.did, []byte(nil), ed25519.Sign(p.priv, JoinProof("acct", "acme/a/b", p.did, hash)))
	f.Add("acct", "acme/a/b", dev, []byte(devKey), ed25519.Sign(testDeviceSeed(p, "laptop"), JoinProof("acct", "acme/a/b", dev, hash)))
	f.Add("acct", "acme/a/b", dev, []byte(nil), []byte{})
	f.Add("acct\x00x", "acme/a/b", "did:key:z6Mk", []byte{1}, make([]byte, 64))
	f.Fuzz(func(t *testing.T, account, ch, identity string, deviceKey, proof []byte) {
		if checkJoinProof(account, ch, identity, deviceKey, hash, proof) != nil {
			return
		}
		person, err := checkDeviceName(identity, deviceKey)
		if err != nil {
			t.Fatalf("accepted a proof for %q, whose name does not check", identity)
		}
		key := ed25519.PublicKey(deviceKey)
		if person == identity {
			key, _ = parseDIDKey(person)
		}
		if !ed25519.Verify(key, JoinProof(account, ch, identity, hash), proof) {
			t.Fatalf("accepted a proof for %q that its key did not sign", identity)
		}
	})
}

// FuzzInviteJoinCursor: a cursor of the invite-join list is parsed
// without panic, and what parses is the cursor of a record that String
// spells the same way.
func FuzzInviteJoinCursor(f *testing.F) {
	f.Add("0:acct:did:key:z6Mk")
	f.Add(inviteJoinCursor{1234, "acct", "did:key:z6Mk#dev:zabc"}.String())
	f.Add("-1:a:b")
	f.Add("1:" + strings.Repeat("a", 65) + ":b")
	f.Add("1:a:\x00")
	f.Fuzz(func(t *testing.T, v string) {
		c, ok := parseInviteJoinCursor(v)
		if !ok {
			return
		}
		if again, ok := parseInviteJoinCursor(c.String()); !ok || again != c {
			t.Fatalf("%q parses to %+v, which does not read back", v, c)
		}
	})
}
