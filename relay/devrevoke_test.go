package relay

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/jwt"
)

func mintDevice(t *testing.T, sub, dev string) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.Mint(testSecret, jwt.Claims{Subject: sub, Audience: jwt.AudienceRelay, Device: dev, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestDeviceRevocation: a linked device's revocation ("<sub>#<device>" in
// the feed) closes that device's sockets and refuses its tokens on every
// endpoint, while the account's own tokens and its other devices' stay.
// A token cannot shed its dev claim on reauthentication.
func TestDeviceRevocation(t *testing.T) { forBackends(t, testDeviceRevocation) }

func testDeviceRevocation(t *testing.T, be *testBackend) {
	src := &fakeRevocations{}
	tr := be.start(t, Config{NoSync: true, Revocations: src, RevocationPoll: 20 * time.Millisecond})
	laptop := mintDevice(t, "alice", "lap12345")
	phone := mintDevice(t, "alice", "pho12345")
	own := mint(t, "alice", "")
	l := dialWS(t, tr.URL, "/ws/"+chA)
	l.auth(laptop)
	p := dialWS(t, tr.URL, "/ws/"+chA)
	p.auth(phone)
	o := dialWS(t, tr.URL, "/ws/"+chA)
	o.auth(own)
	// The laptop's socket may not swap to a token without its claim.
	l2 := dialWS(t, tr.URL, "/ws/"+chA)
	l2.auth(laptop)
	l2.send(map[string]string{"type": "auth", "token": own})
	l2.expectError("forbidden")

	src.revoke("alice#lap12345")
	l.expectError("forbidden")
	l.expectClose(websocket.StatusPolicyViolation)
	if code, m := httpGet(t, tr.URL+"/v1/messages?channel="+chA, laptop); code != 403 || m["error"] != "forbidden" {
		t.Fatalf("the revoked device's read: %d %v", code, m)
	}
	d := dialWS(t, tr.URL, "/ws")
	d.send(map[string]string{"type": "auth", "token": laptop})
	d.expectError("forbidden")
	for _, tok := range []string{phone, own} {
		if code, _ := httpGet(t, tr.URL+"/v1/messages?channel="+chA, tok); code != 200 {
			t.Fatalf("another token of the account is refused: %d", code)
		}
	}
	p.publishAck(chA, []byte("the phone stays"))
}
