package directory

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequestBodies sends arbitrary bodies to every endpoint that takes one
// and checks that the answer is JSON, never a 500, and never a panic.
func FuzzRequestBodies(f *testing.F) {
	e := newFencedEnv(f, nil).env
	ownerID, owner := e.account("acme")
	e.channel(owner, "acme/pay/agent")
	inv := e.invite(owner, "acme/pay/agent", 100)
	paths := []string{
		"/v1/accounts", "/v1/tokens", "/v1/channels", "/v1/channels/invites",
		"/v1/channels/join", "/v1/channels/welcome", "/v1/federation/invites",
		"/v1/device/grants", "/v1/device/grants/approve", "/v1/device/grants/lookup", "/v1/seats", "/v1/revocations",
		"/v1/channels/members", "/v1/channels/fence", "/v1/orgs/invites",
		"/v1/keypackages", "/v1/keypackages/claim", "/v1/inbox", "PUT /v1/channels/groupinfo",
		"/v1/channels/invite-joins/lapse",
	}
	for _, seed := range []string{
		`{"name":"acme/pay/agent"}`,
		`{"channel":"acme/pay/agent","max_uses":5,"ttl_seconds":600}`,
		`{"channel":"acme/pay/agent","token":"` + inv + `","key_package":"AAEC","identity":"did:web:x"}`,
		`{"request_id":"x","welcome":"AA=="}`,
		`{"device_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","label":"x"}`,
		`{"user_code":"BCDF-GHJK","sealed_seat":"` + strings.Repeat("A", 64) + `"}`,
		`{"identity":"did:key:z","channel":"acme/s/h"}`,
		`{"did":"did:skytale:x"}`,
		`{"email":"a@b.c","org":"acme"}`,
		`{"ttl_seconds":60,"audience":"skytale-relay"}`,
		`{"channel":"acme/pay/agent","account_id":"` + ownerID + `"}`,
		`{"channel":"acme/pay/agent","epoch":4294967296,"remove_account_id":"x"}`,
		`{"org":"acme","max_uses":3,"ttl_seconds":60}`,
		`{"email":"a@b.c","org":"acme","org_invite":"skt_org_x"}`,
		`{"device":"did:key:z","key_packages":["AAEC"],"last_resort":"AAEC"}`,
		`{"account_id":"` + ownerID + `","channel":"acme/pay/agent"}`,
		`{"claim_id":"x","welcome":"AA=="}`,
		`{"channel":"acme/pay/agent","epoch":3,"group_info":"AA=="}`,
		`{"channel":"acme/pay/agent","epoch":0,"group_info":"AA=="}`,
		`{"channel":"acme/pay/agent","max_uses":5,"auto":true}`,
		`{"channel":"acme/pay/agent","token":"` + inv + `","identity":"did:key:z6Mk","proof":"AA==","device_key":"AA=="}`,
		`{"channel":"acme/pay/agent","epoch":0,"identities":["did:key:z6Mk"]}`,
		``, `[]`, `{"a":`, "\x00",
	} {
		for i := range paths {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path, method := paths[int(which)%len(paths)], "POST"
		if m, p, ok := strings.Cut(path, " "); ok {
			method, path = m, p
		}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+owner)
		w := httptest.NewRecorder()
		e.s.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q: %d %s", path, body, w.Code, w.Body)
		}
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %q: answer is not JSON: %q", path, body, w.Body)
		}
		if w.Code >= 400 && (v["error"] == nil || v["message"] == nil) {
			t.Fatalf("%s %q: error shape %s", path, body, w.Body)
		}
		if w.Code == http.StatusCreated && path == "/v1/channels/join" && !json.Valid([]byte(body)) {
			t.Fatalf("join accepted invalid JSON %q", body)
		}
	})
}
