// Command custom-client is a client written against the wire surface
// alone: plain net/http and WebSocket calls, with the mls package as the
// MLS engine. An owner creates a channel and admits a joiner; they then
// exchange a message. It walks the eight operations of the directory and
// relay API:
//
//  1. publishKeyPackage  POST /v1/channels/join
//  2. fetchKeyPackages   GET  /v1/channels/pending
//  3. publishWelcome     POST /v1/channels/welcome
//  4. fetchWelcomes      GET  /v1/channels/welcome/{request_id}
//  5. ackWelcome         POST /v1/channels/welcome/{request_id}/ack
//  6. postMessage        WebSocket {"type":"publish"}
//  7. fetchMessages      WebSocket {"type":"message"} live, GET /v1/messages backfill
//  8. syncLog            GET  /v1/sync
//
// By default it starts a stack in-process; -api and -relay point it at a
// running one with open signup (for example `tally serve`).
//
//	go run ./examples/custom-client [-api http://127.0.0.1:3100 -relay http://127.0.0.1:8443]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/mls"
)

const suite = mls.MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519

func main() {
	api := flag.String("api", "", "directory URL (default: an in-process stack)")
	relay := flag.String("relay", "", "relay URL")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if *api == "" {
		var stop func()
		var err error
		if *api, *relay, stop, err = startStack(); err != nil {
			log.Fatal(err)
		}
		defer stop()
	}
	if err := run(ctx, *api, *relay, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// call does one JSON request; b64 fields are []byte in Go, which
// encoding/json writes and reads as standard base64.
func call(ctx context.Context, method, u, bearer string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, req.URL.Path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// party is one client: an account, a JWT, and an MLS signature key.
type party struct {
	did string
	jwt string
	sig []byte
}

func newParty(ctx context.Context, api, email, org, did string) (*party, error) {
	var acct struct {
		APIKey string `json:"api_key"`
	}
	if err := call(ctx, "POST", api+"/v1/accounts", "", map[string]string{"email": email, "org": org}, &acct); err != nil {
		return nil, err
	}
	// The API key is exchanged for a short-lived JWT, used on both planes.
	var tok struct {
		Token string `json:"token"`
	}
	if err := call(ctx, "POST", api+"/v1/tokens", acct.APIKey, map[string]any{}, &tok); err != nil {
		return nil, err
	}
	sig, err := mls.GenerateSignatureKey(suite)
	return &party{did: did, jwt: tok.Token, sig: sig}, err
}

// frame is a relay WebSocket frame, either way.
type frame struct {
	Type      string `json:"type"`
	Token     string `json:"token,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Payload   []byte `json:"payload,omitempty"`
	Message   string `json:"message,omitempty"`
	Code      string `json:"code,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	EntryType int    `json:"entry_type,omitempty"`
}

// dial opens the relay WebSocket, authenticates (the first frame) and
// subscribes to channel.
func dial(ctx context.Context, relay, jwt, channel string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(relay, "http")+"/ws", nil)
	if err != nil {
		return nil, err
	}
	for _, f := range []frame{{Type: "auth", Token: jwt}, {Type: "subscribe", Channel: channel}} {
		if _, err := request(ctx, ws, f); err != nil {
			ws.CloseNow()
			return nil, err
		}
	}
	return ws, nil
}

// request writes f and reads the answer (auth, subscribe and publish are
// answered in order; this client reads nothing else meanwhile).
func request(ctx context.Context, ws *websocket.Conn, f frame) (frame, error) {
	if err := wsjson.Write(ctx, ws, f); err != nil {
		return frame{}, err
	}
	var ans frame
	if err := wsjson.Read(ctx, ws, &ans); err != nil {
		return frame{}, err
	}
	if ans.Type == "error" {
		return ans, fmt.Errorf("relay: %s (%s)", ans.Message, ans.Code)
	}
	return ans, nil
}

func run(ctx context.Context, api, relay string, out io.Writer) error {
	const channel = "acme/support/chat"
	owner, err := newParty(ctx, api, "owner@acme.example", "acme", "did:web:owner.acme.example")
	if err != nil {
		return err
	}
	joiner, err := newParty(ctx, api, "agent@globex.example", "globex", "did:web:agent.globex.example")
	if err != nil {
		return err
	}

	// The owner registers the channel, creates its MLS group (group id
	// SHA-256 of the name) and mints an invite.
	if err := call(ctx, "POST", api+"/v1/channels", owner.jwt, map[string]string{"name": channel}, nil); err != nil {
		return err
	}
	ownerKP, err := mls.NewKeyPackage(suite, owner.did, owner.sig, nil)
	if err != nil {
		return err
	}
	gid := sha256.Sum256([]byte(channel))
	group, err := mls.NewGroup(gid[:], ownerKP, nil)
	if err != nil {
		return err
	}
	var invite struct {
		Token string `json:"token"`
	}
	if err := call(ctx, "POST", api+"/v1/channels/invites", owner.jwt, map[string]any{"channel": channel, "max_uses": 1, "ttl_seconds": 3600}, &invite); err != nil {
		return err
	}

	// 1. The joiner publishes a KeyPackage with the invite.
	bundle, err := mls.NewKeyPackage(suite, joiner.did, joiner.sig, nil)
	if err != nil {
		return err
	}
	var join struct {
		RequestID string `json:"request_id"`
	}
	if err := call(ctx, "POST", api+"/v1/channels/join", joiner.jwt, map[string]any{
		"channel": channel, "token": invite.Token, "identity": joiner.did, "key_package": bundle.Bytes(),
	}, &join); err != nil {
		return err
	}

	// 2. The owner's add-loop: one pending request per cycle.
	var pending struct {
		Requests []struct {
			ID         string `json:"id"`
			Identity   string `json:"identity"`
			KeyPackage []byte `json:"key_package"`
		} `json:"requests"`
	}
	if err := call(ctx, "GET", api+"/v1/channels/pending?channel="+url.QueryEscape(channel), owner.jwt, nil, &pending); err != nil {
		return err
	}
	if len(pending.Requests) != 1 {
		return fmt.Errorf("%d pending requests", len(pending.Requests))
	}
	req := pending.Requests[0]
	add, err := group.AddMembers(req.KeyPackage)
	if err != nil {
		return err
	}
	// 6. The commit goes to the relay first (it fences epochs), and only
	// once it is accepted does the owner move to the new epoch.
	ownerWS, err := dial(ctx, relay, owner.jwt, channel)
	if err != nil {
		return err
	}
	defer ownerWS.CloseNow()
	if _, err := request(ctx, ownerWS, frame{Type: "publish", Channel: channel, Payload: add.Commit}); err != nil {
		group.DiscardCommit()
		return err
	}
	if err := group.ConfirmCommit(); err != nil {
		return err
	}
	// 3. The Welcome goes to the joiner through the directory.
	if err := call(ctx, "POST", api+"/v1/channels/welcome", owner.jwt, map[string]any{"request_id": req.ID, "welcome": add.Welcome}, nil); err != nil {
		return err
	}

	// 4. The joiner polls for its Welcome, joins, and 5. acks.
	var welcome struct {
		Status  string `json:"status"`
		Welcome []byte `json:"welcome"`
	}
	for welcome.Status != "completed" {
		if err := call(ctx, "GET", api+"/v1/channels/welcome/"+join.RequestID, joiner.jwt, nil, &welcome); err != nil {
			return err
		}
		if welcome.Status != "completed" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	member, err := mls.Join(welcome.Welcome, bundle, nil, nil)
	if err != nil {
		return err
	}
	if err := call(ctx, "POST", api+"/v1/channels/welcome/"+join.RequestID+"/ack", joiner.jwt, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "joined %s at epoch %d\n", channel, member.Epoch())

	// 6 and 7, live: the joiner subscribes, the owner publishes.
	joinerWS, err := dial(ctx, relay, joiner.jwt, channel)
	if err != nil {
		return err
	}
	defer joinerWS.CloseNow()
	ct, err := group.Protect([]byte("hello from the owner"), nil)
	if err != nil {
		return err
	}
	if _, err := request(ctx, ownerWS, frame{Type: "publish", Channel: channel, Payload: ct}); err != nil {
		return err
	}
	var push frame
	if err := wsjson.Read(ctx, joinerWS, &push); err != nil {
		return err
	}
	got, err := member.Process(push.Payload)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "live seq %d from %s: %s\n", push.Seq, got.SenderIdentity, got.Data)

	return catchUp(ctx, relay, joiner.jwt, channel, out)
}

// catchUp reads the channel back as a member who was away does: 7, the
// application messages only, and 8, the full log, commits included.
func catchUp(ctx context.Context, relay, jwt, channel string, out io.Writer) error {
	// 7, backfill: application messages only.
	var msgs struct {
		Messages []struct {
			Seq uint64 `json:"seq"`
		} `json:"messages"`
		HasMore bool `json:"has_more"`
	}
	q := "?channel=" + url.QueryEscape(channel) + "&since_seq=0&limit=100"
	if err := call(ctx, "GET", relay+"/v1/messages"+q, jwt, nil, &msgs); err != nil {
		return err
	}
	fmt.Fprintf(out, "backfill: %d application message(s), has_more %v\n", len(msgs.Messages), msgs.HasMore)

	// 8. The full log, commits included: what a returning member replays.
	var sync struct {
		Entries []struct {
			Seq       uint64 `json:"seq"`
			EntryType int    `json:"entry_type"`
		} `json:"entries"`
	}
	if err := call(ctx, "GET", relay+"/v1/sync"+q, jwt, nil, &sync); err != nil {
		return err
	}
	for _, e := range sync.Entries {
		fmt.Fprintf(out, "sync: seq %d entry_type %d\n", e.Seq, e.EntryType)
	}
	return nil
}

// startStack runs a directory and a relay on loopback with open signup.
func startStack() (api, relay string, stop func(), err error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	st, err := skytale.NewStack(context.Background(), skytale.StackConfig{JWTSecret: secret, Directory: skytale.DirectoryConfig{OpenSignup: true}})
	if err != nil {
		return "", "", nil, err
	}
	var urls []string
	var servers []*http.Server
	for _, h := range []http.Handler{st.Directory, st.Relay} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", nil, errors.Join(err, st.Close(context.Background()))
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		servers = append(servers, srv)
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls[0], urls[1], func() {
		for _, s := range servers {
			s.Close()
		}
		st.Close(context.Background())
	}, nil
}
