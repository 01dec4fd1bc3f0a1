package relay

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
)

// TestNextEpoch: the fence read from outside follows the commits the
// archive acknowledged and the owner's resets, is unknown on a channel
// that had neither, and survives a restart, on both archives.
func TestNextEpoch(t *testing.T) { forBackends(t, testNextEpoch) }

func testNextEpoch(t *testing.T, be *testBackend) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	gid := []byte("g")
	want := func(tr *testRelay, ch string, epoch uint64, known bool) {
		t.Helper()
		e, k, err := tr.NextEpoch(ctx, ch)
		if err != nil || e != epoch || k != known {
			t.Fatalf("NextEpoch(%s) = %d, %v, %v; want %d, %v", ch, e, k, err, epoch, known)
		}
	}
	tr := be.start(t, Config{DBPath: path, OpenChannels: true})
	want(tr, chA, 0, false)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, privateMessage(gid, 0, 1)) // an application message moves nothing
	want(tr, chA, 0, false)
	c.publishAck(chA, publicMessage(gid, 0, 3))
	want(tr, chA, 1, true) // as soon as the ack is in
	c.publishAck(chA, publicMessage(gid, 1, 3))
	want(tr, chA, 2, true)
	c.publish(chA, publicMessage(gid, 9, 3)) // refused: moves nothing
	c.expectError("stale_epoch")
	want(tr, chA, 2, true)
	if err := tr.arch.ResetFence(chA, 5, 0); err != nil {
		t.Fatal(err)
	}
	want(tr, chA, 5, true)
	if _, _, err := tr.NextEpoch(ctx, "not a channel"); err == nil {
		t.Fatal("NextEpoch of a bad name: no error")
	}

	c.c.CloseNow()
	tr.stop(t)
	tr = be.start(t, Config{DBPath: path, OpenChannels: true})
	want(tr, chA, 5, true)
	want(tr, "acme/rooms/other", 0, false)
}

// TestInternalFence: GET /v1/internal/fence answers the fence to the
// holder of the internal secret only; an account's token (a member's or
// anyone's), a wrong secret, or a relay without one get 401.
func TestInternalFence(t *testing.T) {
	secret := []byte("relay-internal-secret-0123456789")
	tr := startRelay(t, Config{InternalSecret: secret})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, publicMessage([]byte("g"), 3, 3))
	u := tr.URL + "/v1/internal/fence?channel=" + url.QueryEscape(chA)

	status, body := httpGet(t, u, string(secret))
	if status != 200 || body["epoch"] != float64(4) || body["known"] != true || body["channel"] != chA {
		t.Fatalf("with the secret: %d %v", status, body)
	}
	status, body = httpGet(t, tr.URL+"/v1/internal/fence?channel="+url.QueryEscape("acme/rooms/new"), string(secret))
	if status != 200 || body["known"] != false || body["epoch"] != float64(0) {
		t.Fatalf("unknown channel: %d %v", status, body)
	}
	if status, body = httpGet(t, tr.URL+"/v1/internal/fence?channel=x", string(secret)); status != 400 || body["error"] != "invalid_channel" {
		t.Fatalf("bad channel: %d %v", status, body)
	}
	for name, tok := range map[string]string{
		"no credential":  "",
		"wrong secret":   "relay-internal-secret-0123456788",
		"account token":  mint(t, "alice", ""),
		"stranger token": mint(t, "mallory", ""),
	} {
		if status, body := httpGet(t, u, tok); status != 401 || body["error"] != "unauthorized" {
			t.Errorf("%s: %d %v, want 401 unauthorized", name, status, body)
		}
	}

	open := startRelay(t, Config{})
	open.inCluster = true // stops while tr runs
	if status, _ := httpGet(t, open.URL+"/v1/internal/fence?channel="+url.QueryEscape(chA), ""); status != 401 {
		t.Fatalf("relay without a secret, no credential: %d, want 401", status)
	}
}
