package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/relay/jsarchive"
)

// TestServeClusterUpdateStream: tally serve cluster update-stream changes
// the replica count of the relays' stream, after which a relay configured
// with the old count refuses to start and one with the new count starts;
// a count out of range and a stream that does not exist are refused.
func TestServeClusterUpdateStream(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: 8 << 20, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	_, port, _ := net.SplitHostPort(ns.Addr().String())
	p, _ := strconv.Atoi(port)
	url := fmt.Sprintf("nats://127.0.0.1:%d", p)
	secret := []byte(strings.Repeat("k", 32))
	start := func(replicas int) error {
		s, err := relay.New(context.Background(), relay.Config{Archive: jsarchive.New(jsarchive.Config{URL: url, Stream: "UPD", Replicas: replicas}), JWTSecret: secret, OpenChannels: true})
		if err == nil {
			s.Close(context.Background())
		}
		return err
	}
	cmd := []string{"serve", "cluster", "update-stream", "--relay-nats", url, "--relay-nats-stream", "UPD"}
	if _, err := tally(t, "", append(cmd, "--replicas", "1")...); err == nil {
		t.Fatal("update of a stream that does not exist succeeded")
	}
	if err := start(1); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"0", "6"} {
		if _, err := tally(t, "", append(cmd, "--replicas", bad)...); err == nil {
			t.Fatalf("--replicas %s accepted", bad)
		}
	}
	// One server holds at most one replica: asking for more is JetStream's
	// refusal, and changes nothing.
	if _, err := tally(t, "", append(cmd, "--replicas", "3")...); err == nil {
		t.Fatal("3 replicas on one server accepted")
	}
	if err := start(1); err != nil {
		t.Fatalf("after a refused update: %v", err)
	}
	if err := start(2); err == nil || !strings.Contains(err.Error(), "update-stream --replicas 2") {
		t.Fatalf("a relay at 2 replicas on an R1 stream: %v", err)
	}
	out := mustTally(t, append(cmd, "--replicas", "1")...)
	if !strings.Contains(out, "stream UPD now has 1 replicas") {
		t.Fatalf("update-stream said %q", out)
	}
}
