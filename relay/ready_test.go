package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// waitStatus polls url until it answers want, failing the test after a
// minute; it returns the last body.
func waitStatus(t *testing.T, url string, want int, what string) map[string]any {
	t.Helper()
	var m map[string]any
	waitfor.Nil(t, time.Minute, func() error {
		var code int
		if code, m = httpGet(t, url, ""); code != want {
			return fmt.Errorf("%s: GET %s answers %d %v, want %d", what, url, code, m, want)
		}
		return nil
	})
	return m
}

// TestReadyFollowsNATS: a relay on a real nats-server process is ready
// while the server answers, not ready (503, and its backend gauge 0)
// while the server is stopped (SIGSTOP) and after it is killed, and ready
// again once it is back on its store; /health, liveness, stays 200
// throughout.
func TestReadyFollowsNATS(t *testing.T) {
	dir := t.TempDir()
	cmd, port := startNATSChild(t, dir, 0)
	tr := startRelay(t, withJS(Config{OpenChannels: true}, "nats://127.0.0.1:"+strconv.Itoa(port), "READY", 0))
	waitStatus(t, tr.URL+"/ready", http.StatusOK, "on a running NATS")
	if !tr.Stats().BackendUp {
		t.Fatal("backend down while NATS runs")
	}

	cmd.Process.Signal(syscall.SIGSTOP)
	m := waitStatus(t, tr.URL+"/ready", http.StatusServiceUnavailable, "NATS stopped")
	if m["error"] != "unavailable" || m["message"] == "" {
		t.Fatalf("not ready answer %v", m)
	}
	if code, _ := httpGet(t, tr.URL+"/health", ""); code != http.StatusOK {
		t.Fatalf("/health %d while NATS is stopped: liveness must not follow the backend", code)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	waitStatus(t, tr.URL+"/ready", http.StatusOK, "NATS continued")

	cmd.Process.Kill()
	cmd.Wait()
	waitStatus(t, tr.URL+"/ready", http.StatusServiceUnavailable, "NATS killed")
	if tr.Stats().BackendUp {
		t.Fatal("backend up while NATS is dead")
	}
	startNATSChild(t, dir, port)
	waitStatus(t, tr.URL+"/ready", http.StatusOK, "NATS restarted")
}

// TestReadyFollowsFeeds: a relay whose directory feeds stop answering
// turns not ready once they are older than ReadyFeedLag, shows the lag
// and the failed polls in its metrics, and is ready again once the feeds
// answer.
func TestReadyFollowsFeeds(t *testing.T) {
	members := NewMemberSet()
	var down atomic.Bool
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Write([]byte(`{"subs":[],"events":[],"next":0}`))
	}))
	defer feed.Close()
	tr := startRelay(t, Config{
		Members:        members,
		Revocations:    NewHTTPRevocations(feed.URL, "secret", nil),
		RevocationPoll: 20 * time.Millisecond,
		ReadyFeedLag:   300 * time.Millisecond,
	})
	waitStatus(t, tr.URL+"/ready", http.StatusOK, "feeds answering")
	down.Store(true)
	m := waitStatus(t, tr.URL+"/ready", http.StatusServiceUnavailable, "revocation feed down")
	if s, _ := m["message"].(string); s == "" {
		t.Fatalf("answer %v names no reason", m)
	}
	if f := feedOf(t, tr.Stats(), "revocations"); f.ErrorsTotal < 1 || f.Lag < 300*time.Millisecond {
		t.Fatalf("feed errors %d, lag %v with the feed down past the bound", f.ErrorsTotal, f.Lag)
	}
	down.Store(false)
	waitStatus(t, tr.URL+"/ready", http.StatusOK, "feeds back")
}

// TestNewTellsNATSUnreachable: New's error says (ErrArchiveUnreachable) when
// NATS did not answer, so a caller may wait and try again, and does not
// when the node's settings disagree with the stream, which no wait mends.
func TestNewTellsNATSUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	l.Close()
	_, err = New(context.Background(), withJS(Config{JWTSecret: testSecret, OpenChannels: true}, dead, "", 0))
	if !errors.Is(err, ErrArchiveUnreachable) {
		t.Fatalf("New on a dead NATS: %v, want ErrArchiveUnreachable", err)
	}
	n := startNATS(t)
	startRelay(t, withJS(Config{}, n.URL, "REFUSE", 1))
	_, err = New(context.Background(), withJS(Config{JWTSecret: testSecret, OpenChannels: true}, n.URL, "REFUSE", 3))
	if err == nil || errors.Is(err, ErrArchiveUnreachable) {
		t.Fatalf("New with replicas the stream does not have: %v, want a refusal that is not ErrArchiveUnreachable", err)
	}
}
