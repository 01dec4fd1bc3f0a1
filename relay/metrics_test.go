package relay

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/internal/metricstest"
)

// TestMetrics: connections, subscriptions, deliveries and publishes by
// result are counted, and no label names a channel or an account.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := startRelay(t, Config{NoSync: true, Metrics: reg})
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

	for name, want := range map[string]float64{
		"skytale_relay_connections":      2,
		"skytale_relay_subscriptions":    2,
		"skytale_relay_channels_live":    1,
		"skytale_relay_deliveries_total": 2,
	} {
		if got := metricstest.Value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricstest.Value(t, reg, "skytale_relay_stored_bytes"); got <= 0 {
		t.Errorf("stored bytes %v", got)
	}
	families0, _ := reg.Gather()
	commits := false
	for _, f := range families0 {
		if f.GetName() == "skytale_relay_archive_commit_seconds" && f.GetMetric()[0].GetHistogram().GetSampleCount() > 0 {
			commits = true
		}
	}
	if !commits {
		t.Error("no archive commit observed")
	}
	if got := metricstest.Value(t, reg, "skytale_relay_publishes_total", "result", "ok"); got != 2 {
		t.Errorf("ok publishes %v", got)
	}
	if got := metricstest.Value(t, reg, "skytale_relay_publishes_total", "result", "stale_epoch"); got != 1 {
		t.Errorf("stale publishes %v", got)
	}
	metricstest.Labels(t, reg, func(metric, label, v string) {
		if strings.Contains(v, "acme") || strings.Contains(v, "alice") {
			t.Errorf("%s has the label %s=%q", metric, label, v)
		}
	})
	// A second relay on the same registry is refused before it opens
	// anything.
	if _, err := New(Config{JWTSecret: testSecret, OpenChannels: true, Metrics: reg}); err == nil {
		t.Error("two relays registered the same metrics")
	}
}
