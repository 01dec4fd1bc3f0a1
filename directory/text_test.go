package directory

import "testing"

// TestTextNoBackendCanHold: text PostgreSQL cannot hold (NUL, invalid
// UTF-8) gets the same answer on every backend and changes nothing: a
// field to be stored is 400, an id or account to be looked up is not
// found.
func TestTextNoBackendCanHold(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		inv := e.invite(owner, ch, 5)
		grant := e.do("POST", "/v1/device/grants", "", grantBody(t))
		want(t, grant, 201, "")
		before := e.snapshot()

		want(t, e.join(owner, ch, inv, "did:web:a\x00b", []byte("kp")), 400, "invalid_request")
		want(t, e.do("POST", "/v1/seats", owner, map[string]string{"identity": "did:key:z\x00", "channel": "acme/seat/home"}), 400, "invalid_request")
		body := grantBody(t)
		body["label"] = "lap\x00top"
		want(t, e.do("POST", "/v1/device/grants", "", body), 400, "invalid_request")
		want(t, e.do("POST", "/v1/revocations", testInternalSecret, map[string]string{"did": "did:skytale:a\x00"}), 400, "invalid_request")

		for _, id := range []string{"%FF", "a%00b"} {
			want(t, e.do("GET", "/v1/channels/welcome/"+id, owner, nil), 404, "not_found")
			want(t, e.do("POST", "/v1/channels/welcome/"+id+"/ack", owner, nil), 200, "")
			want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": "\xff", "welcome": "AA=="}), 404, "not_found")
			want(t, e.do("GET", "/v1/device/grants/"+id, grant.str("poll_token"), nil), 404, "not_found")
			want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": "a\x00b"}), 404, "account_not_found")
			want(t, e.do("DELETE", "/v1/channels/members?channel="+ch+"&account_id="+id, owner, nil), 404, "account_not_found")
		}
		if e.snapshot() != before {
			t.Fatal("a refused request changed the store")
		}
	})
}
