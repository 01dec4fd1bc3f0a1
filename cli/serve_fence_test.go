package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServeSplitGroupInfoFence: a directory run apart from its relay
// (tally serve --only directory --relay-url) reads the relay's commit
// fence over the relay's internal endpoint with the internal secret, and
// keeps a GroupInfo only for the epoch the fence has reached; while the
// relay cannot be read, it keeps none.
func TestServeSplitGroupInfoFence(t *testing.T) {
	data := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relAddr := l.Addr().String()
	l.Close()
	d := startServe(t, data, "--quiet", "--only", "directory", "--relay-url", "http://"+relAddr)
	acct, tok := signUp(t, d.apiURL)
	const ch = "acme/ops/fenced"
	registerChannel(t, d.apiURL, acct.APIKey, ch)
	put := func(epoch uint64) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"channel": ch, "epoch": epoch, "group_info": base64.StdEncoding.EncodeToString([]byte("gi"))})
		req, _ := http.NewRequest("PUT", d.apiURL+"/v1/channels/groupinfo", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+acct.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error
	}
	wantPut := func(epoch uint64, status int, code string) {
		t.Helper()
		if s, c := put(epoch); s != status || c != code {
			t.Fatalf("put at epoch %d: %d %q, want %d %q", epoch, s, c, status, code)
		}
	}
	wantPut(0, 503, "fence_unavailable") // no relay yet

	r := startServe(t, data, "--quiet", "--only", "relay", "--relay-addr", relAddr, "--directory-url", d.apiURL)
	wantPut(0, 200, "") // no commit yet: the creation's epoch
	wantPut(1, 409, "epoch_not_reached")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, send := relaySocket(ctx, t, r.relURL+"/ws/"+ch, tok)
	if got := send(frame{Type: "publish", Channel: ch, Payload: mlsCommit(0)}); got.Type != "ok" {
		t.Fatalf("commit at 0: %+v", got)
	}
	wantPut(0, 409, "stale_epoch")
	wantPut(1<<62, 409, "epoch_not_reached")
	wantPut(1, 200, "")
}
