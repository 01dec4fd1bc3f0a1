package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// find returns the element of xs that match picks, failing the test
// when there is none.
func find[E any](t testing.TB, xs []E, match func(E) bool) E {
	t.Helper()
	for _, x := range xs {
		if match(x) {
			return x
		}
	}
	var zero E
	t.Fatalf("none of %v matches", xs)
	return zero
}

// count is the Count labelled label in cs.
func count(t testing.TB, cs []Count, label string) uint64 {
	t.Helper()
	return find(t, cs, func(c Count) bool { return c.Label == label }).N
}

func budgetStats(t testing.TB, st Stats, scope string) BudgetStats {
	t.Helper()
	return find(t, st.Budgets, func(b BudgetStats) bool { return b.Scope == scope })
}

func feedOf(t testing.TB, st Stats, name string) FeedStats {
	t.Helper()
	return find(t, st.Feeds, func(f FeedStats) bool { return f.Name == name })
}

// commitCounter is a Metrics that counts the archive's group commits.
type commitCounter struct{ n atomic.Uint64 }

func (*commitCounter) Watch(*Server) error           { return nil }
func (c *commitCounter) ArchiveCommit(time.Duration) { c.n.Add(1) }

// TestStats: connections, subscriptions, deliveries and publishes by
// result are counted, and the archive's commits reach Config.Metrics.
func TestStats(t *testing.T) {
	m := &commitCounter{}
	tr := startRelay(t, Config{NoSync: true, Metrics: m})
	a := dialWS(t, tr.URL, "/ws/"+chA)
	a.auth(mint(t, "alice", ""))
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))
	gid := []byte("group")
	a.publishAck(chA, []byte("hello"))
	b.expect(map[string]any{"type": "message", "channel": chA})
	a.publishAck(chA, publicMessage(gid, 0, 3)) // a commit at epoch 0
	b.expect(map[string]any{"type": "message", "channel": chA})
	a.publish(chA, publicMessage(gid, 0, 3)) // the same epoch again
	a.expectError("stale_epoch")

	st := tr.Stats()
	if st.Connections != 2 || st.Subscriptions != 2 || st.ChannelsLive != 1 || st.DeliveriesTotal != 2 {
		t.Errorf("connections %d, subscriptions %d, live channels %d, deliveries %d; want 2, 2, 1, 2",
			st.Connections, st.Subscriptions, st.ChannelsLive, st.DeliveriesTotal)
	}
	if st.StoredBytes <= 0 || !st.BackendUp {
		t.Errorf("stored bytes %d, backend up %v", st.StoredBytes, st.BackendUp)
	}
	if n := m.n.Load(); n == 0 {
		t.Error("no archive commit observed")
	}
	if got := count(t, st.Publishes, "ok"); got != 2 {
		t.Errorf("ok publishes %v", got)
	}
	if got := count(t, st.Publishes, "stale_epoch"); got != 1 {
		t.Errorf("stale publishes %v", got)
	}
}

// TestMetricsWatchRefusal: a Metrics that refuses to watch fails New.
func TestMetricsWatchRefusal(t *testing.T) {
	if _, err := New(context.Background(), Config{JWTSecret: testSecret, OpenChannels: true, Metrics: refusingMetrics{}}); err == nil {
		t.Error("New ignored the metrics' refusal")
	}
}

type refusingMetrics struct{}

func (refusingMetrics) Watch(*Server) error         { return errors.New("already serving a relay") }
func (refusingMetrics) ArchiveCommit(time.Duration) {}
