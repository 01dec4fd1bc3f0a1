package skytale_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/skytale-oss/skytale/skytaletest"
)

// mlsCommit hand-builds the cleartext header of an RFC 9420 §6
// PublicMessage carrying a commit (content type 3) from a member, followed
// by opaque bytes standing in for the rest of the message.
func mlsCommit(groupID []byte, epoch uint64) []byte {
	b := []byte{0, 1, 0, 1}           // mls10, mls_public_message
	b = append(b, byte(len(groupID))) // group_id<V> (short varint)
	b = append(b, groupID...)         //
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, 1, 0, 0, 0, 0) // sender: member, leaf 0
	b = append(b, 0)             // authenticated_data<V>: empty
	b = append(b, 3)             // content_type: commit
	return append(b, "opaque commit body"...)
}

// mlsWelcome is an MLSMessage with wire format mls_welcome (3).
func mlsWelcome() []byte { return append([]byte{0, 1, 0, 3}, "opaque welcome body"...) }

type wireFrame struct {
	Type      string `json:"type"`
	Token     string `json:"token,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Payload   string `json:"payload,omitempty"`
	Message   string `json:"message,omitempty"`
	Code      string `json:"code,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	EntryType int    `json:"entry_type,omitempty"`
	TS        int64  `json:"ts,omitempty"`
}

type flowClient struct {
	t      *testing.T
	st     *skytaletest.Stack
	apiKey string
}

// call sends a JSON request to the directory and decodes the answer.
func (c *flowClient) call(method, path string, in, out any) int {
	c.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.st.APIURL+path, body)
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode
}

// relayGet reads a relay catch-up endpoint with a fresh token.
func (c *flowClient) relayGet(path string, out any) {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.st.RelayURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.st.Token(c.t, c.apiKey))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		c.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		c.t.Fatal(err)
	}
}

type flowSocket struct {
	t *testing.T
	c *websocket.Conn
}

// dial opens /ws, authenticates and subscribes to ch.
func (c *flowClient) dial(ch string) *flowSocket {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.st.RelayURL, "http")+"/ws", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	ws.SetReadLimit(2 << 20)
	s := &flowSocket{c.t, ws}
	c.t.Cleanup(func() { ws.CloseNow() })
	if f := s.roundTrip(wireFrame{Type: "auth", Token: c.st.Token(c.t, c.apiKey)}); f.Type != "ok" || f.Message != "authenticated" {
		c.t.Fatalf("auth: %+v", f)
	}
	if f := s.roundTrip(wireFrame{Type: "subscribe", Channel: ch}); f.Type != "ok" || f.Message != "subscribed to "+ch {
		c.t.Fatalf("subscribe: %+v", f)
	}
	return s
}

func (s *flowSocket) read() wireFrame {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var f wireFrame
	if err := wsjson.Read(ctx, s.c, &f); err != nil {
		s.t.Fatal(err)
	}
	return f
}

func (s *flowSocket) roundTrip(f wireFrame) wireFrame {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, s.c, f); err != nil {
		s.t.Fatal(err)
	}
	return s.read()
}

// publish publishes payload on ch and returns the acknowledged seq.
func (s *flowSocket) publish(ch string, payload []byte) uint64 {
	s.t.Helper()
	f := s.roundTrip(wireFrame{Type: "publish", Channel: ch, Payload: base64.StdEncoding.EncodeToString(payload)})
	if f.Type != "ok" || f.Message != "published" || f.Seq == 0 {
		s.t.Fatalf("publish: %+v", f)
	}
	return f.Seq
}

// TestSeedFlows runs the three basic client flows end to end over real
// HTTP and WebSockets, with opaque bytes standing in for MLS key packages
// and Welcomes and hand-built MLS headers for the commits: the owner's
// add-loop, the joiner's publish-poll-ack, and a returning member's
// reconnect through GET /v1/sync.
func TestSeedFlows(t *testing.T) {
	st := skytaletest.NewStack(t)
	const ch = "acme/payments/agent-v1"
	owner := &flowClient{t, st, st.NewAccount(t, "acme").APIKey}
	memberAcct := st.NewAccount(t, "acme")
	member := &flowClient{t, st, memberAcct.APIKey}
	gid := []byte("group id: SHA-256 of the name")

	// Owner: register, subscribe, invite.
	var reg struct{ ID, Name string }
	if code := owner.call("POST", "/v1/channels", map[string]string{"name": ch}, &reg); code != 201 || reg.Name != ch {
		t.Fatalf("register: %d %+v", code, reg)
	}
	// The member joined earlier; the owner lists it in the directory,
	// which is what lets it use the channel on the relay.
	if code := owner.call("POST", "/v1/channels/members", map[string]string{"channel": ch, "account_id": memberAcct.ID}, nil); code != 200 {
		t.Fatalf("add member: %d", code)
	}
	ownerWS := owner.dial(ch)
	memberWS := member.dial(ch)
	var inv struct{ Token string }
	if code := owner.call("POST", "/v1/channels/invites", map[string]any{"channel": ch, "max_uses": 3}, &inv); code != 201 {
		t.Fatalf("invite: %d", code)
	}

	// The member reads live traffic, then goes offline after seq 1.
	seq := ownerWS.publish(ch, []byte("app message 1"))
	if f := memberWS.read(); f.Type != "message" || f.Seq != seq || f.EntryType != 0 {
		t.Fatalf("live push: %+v", f)
	}
	lastSeen := seq
	memberWS.c.Close(websocket.StatusNormalClosure, "")

	// Three joiners publish key packages.
	type joiner struct {
		c         *flowClient
		requestID string
		kp        []byte
	}
	var joiners []*joiner
	for i := range 3 {
		j := &joiner{c: &flowClient{t, st, st.NewAccount(t, fmt.Sprint("org", i)).APIKey}, kp: []byte(fmt.Sprintf("key package %d", i))}
		var r struct {
			RequestID string `json:"request_id"`
		}
		code := j.c.call("POST", "/v1/channels/join", map[string]string{
			"channel": ch, "token": inv.Token, "identity": fmt.Sprintf("did:web:agent%d.example.com", i),
			"key_package": base64.StdEncoding.EncodeToString(j.kp),
		}, &r)
		if code != 201 || r.RequestID == "" {
			t.Fatalf("join %d: %d", i, code)
		}
		j.requestID = r.RequestID
		var poll struct{ Status, Welcome string }
		if code := j.c.call("GET", "/v1/channels/welcome/"+j.requestID, nil, &poll); code != 200 || poll.Status != "pending" || poll.Welcome != "" {
			t.Fatalf("poll before the Welcome: %d %+v", code, poll)
		}
		joiners = append(joiners, j)
	}

	// The owner's add-loop: one request per cycle, a commit per add fanned
	// out through the relay, then the Welcome handed off.
	epoch := uint64(0)
	var commitSeqs []uint64
	for cycle := range joiners {
		var pending struct {
			Requests []struct {
				ID         string `json:"id"`
				Identity   string `json:"identity"`
				KeyPackage string `json:"key_package"`
				CreatedAt  string `json:"created_at"`
			} `json:"requests"`
		}
		if code := owner.call("GET", "/v1/channels/pending?channel="+url.QueryEscape(ch), nil, &pending); code != 200 || len(pending.Requests) != len(joiners)-cycle {
			t.Fatalf("cycle %d: pending %d %+v", cycle, code, pending)
		}
		req := pending.Requests[0]
		j := joiners[cycle]
		if kp, _ := base64.StdEncoding.DecodeString(req.KeyPackage); req.ID != j.requestID || !bytes.Equal(kp, j.kp) {
			t.Fatalf("cycle %d: head of the queue %+v", cycle, req)
		}
		commitSeqs = append(commitSeqs, ownerWS.publish(ch, mlsCommit(gid, epoch)))
		epoch++
		ownerWS.publish(ch, []byte(fmt.Sprintf("chat after add %d", cycle)))
		var done struct {
			Status  string          `json:"status"`
			Welcome json.RawMessage `json:"welcome"`
		}
		welcome := append(mlsWelcome(), j.kp...)
		code := owner.call("POST", "/v1/channels/welcome", map[string]string{"request_id": req.ID, "welcome": base64.StdEncoding.EncodeToString(welcome)}, &done)
		if code != 200 || done.Status != "completed" || string(done.Welcome) != "null" {
			t.Fatalf("publish Welcome: %d %+v", code, done)
		}

		// The joiner polls, joins, acks (twice: idempotent).
		var poll struct{ Status, Welcome string }
		if code := j.c.call("GET", "/v1/channels/welcome/"+j.requestID, nil, &poll); code != 200 || poll.Status != "completed" {
			t.Fatalf("poll: %d %+v", code, poll)
		}
		if got, _ := base64.StdEncoding.DecodeString(poll.Welcome); !bytes.Equal(got, welcome) {
			t.Fatalf("Welcome %q, want %q", got, welcome)
		}
		for i, want := range []bool{true, false} {
			var ack struct{ Acked bool }
			if code := j.c.call("POST", "/v1/channels/welcome/"+j.requestID+"/ack", nil, &ack); code != 200 || ack.Acked != want {
				t.Fatalf("ack %d: %d %+v", i, code, ack)
			}
		}
	}
	// A commit for an epoch already used is fenced.
	f := ownerWS.roundTrip(wireFrame{Type: "publish", Channel: ch, Payload: base64.StdEncoding.EncodeToString(mlsCommit(gid, 0))})
	if f.Type != "error" || f.Code != "stale_epoch" {
		t.Fatalf("stale commit: %+v", f)
	}

	// The returning member syncs from its last seq in small pages: the
	// commits it missed (entry type 1) in order, with the chat between them.
	var got []uint64
	var types []int
	since := lastSeen
	for pages := 0; ; pages++ {
		var page struct {
			Entries []struct {
				Seq       uint64 `json:"seq"`
				EntryType int    `json:"entry_type"`
				Payload   string `json:"payload"`
				TS        int64  `json:"ts"`
			} `json:"entries"`
			HasMore bool `json:"has_more"`
		}
		member.relayGet(fmt.Sprintf("/v1/sync?channel=%s&since_seq=%d&limit=2", url.QueryEscape(ch), since), &page)
		for _, e := range page.Entries {
			got = append(got, e.Seq)
			types = append(types, e.EntryType)
			since = e.Seq
		}
		if !page.HasMore {
			break
		}
		if pages > 10 {
			t.Fatal("sync never ends")
		}
	}
	if fmt.Sprint(got) != "[2 3 4 5 6 7]" || fmt.Sprint(types) != "[1 0 1 0 1 0]" {
		t.Fatalf("sync after seq %d: seqs %v types %v", lastSeen, got, types)
	}
	if fmt.Sprint(commitSeqs) != "[2 4 6]" {
		t.Fatalf("commit seqs %v", commitSeqs)
	}

	// Then resumes the WebSocket and is live again.
	memberWS = member.dial(ch)
	seq = ownerWS.publish(ch, []byte("welcome back"))
	if f := memberWS.read(); f.Type != "message" || f.Seq != seq || f.Seq != 8 {
		t.Fatalf("live after reconnect: %+v", f)
	}

	// A cold open reads the app messages only.
	var msgs struct {
		Messages []struct {
			Seq uint64 `json:"seq"`
		} `json:"messages"`
		HasMore bool `json:"has_more"`
	}
	member.relayGet("/v1/messages?channel="+url.QueryEscape(ch), &msgs)
	var appSeqs []uint64
	for _, m := range msgs.Messages {
		appSeqs = append(appSeqs, m.Seq)
	}
	if fmt.Sprint(appSeqs) != "[1 3 5 7 8]" || msgs.HasMore {
		t.Fatalf("cold open: %v has_more %v", appSeqs, msgs.HasMore)
	}
}
