package relay

import (
	"testing"

	"github.com/coder/websocket"
)

// TestStrictFrameKeys: a frame with a repeated key, or a key that matches
// a field only case-insensitively, is refused: as the first frame it
// closes the socket like any bad first frame, afterwards it is bad_frame
// and changes nothing.
func TestStrictFrameKeys(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	tok := mint(t, "alice", "")
	for _, first := range []string{
		`{"type":"auth","token":"` + tok + `","token":"` + tok + `"}`,
		`{"type":"auth","TOKEN":"` + tok + `"}`,
		`{"Type":"auth","token":"` + tok + `"}`,
		`{"type":"subscribe","type":"auth","token":"` + tok + `"}`,
	} {
		c := dialWS(t, tr.URL, "/ws")
		c.sendRaw(websocket.MessageText, []byte(first))
		c.expectError("auth_required")
		c.expectClose(websocket.StatusPolicyViolation)
	}

	c := dialWS(t, tr.URL, "/ws")
	c.auth(tok)
	c.subscribe(chA)
	for _, f := range []string{
		`{"type":"publish","channel":"` + chA + `","payload":"YQ==","payload":"Yg=="}`,
		`{"type":"publish","channel":"acme/other/chan","Channel":"` + chA + `","payload":"YQ=="}`,
		`{"type":"publish","channel":"` + chA + `","PAYLOAD":"YQ=="}`,
		`{"type":"publish","type":"subscribe","channel":"` + chA + `","payload":"YQ=="}`,
		`{"type":"publish","channel":"` + chA + `","payload":"YQ==","x":{"k":1,"k":2}}`,
	} {
		c.sendRaw(websocket.MessageText, []byte(f))
		c.expectError("bad_frame")
	}
	if n := archivedRows(t, tr, chA); n != 0 {
		t.Fatalf("%d entries archived from refused frames", n)
	}
	c.publishAck(chA, []byte("a"))
}
