package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/relay/relaymetrics"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestDiskProbe: the probe flushes a real file and reports a rate and a
// latency for it.
func TestDiskProbe(t *testing.T) {
	r, err := diskProbe(t.Context(), t.TempDir(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.rate <= 0 || r.p50 <= 0 || r.p99 < r.p50 {
		t.Fatalf("probe %+v", r)
	}
}

// TestDurableAcksPerFlush: against a relay whose metrics are served, a
// durable case counts the acks each archive commit carried, and a run
// with the disk probe and a noflush target beside it completes.
func TestDurableAcksPerFlush(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: relay.Config{Metrics: relaymetrics.New(reg)}})
	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer ms.Close()
	nf := skytaletest.NewStackWith(t, skytaletest.Options{Relay: relay.Config{NoSync: true}})
	o := options{api: st.APIURL, relay: st.RelayURL, metrics: ms.URL, fsyncDir: t.TempDir(),
		targets: []string{"skytale", "noflush"},
		others:  map[string]skytaleRelay{"noflush": {api: nf.APIURL, relay: nf.RelayURL}},
		rounds:  1, round: 200 * time.Millisecond, size: 256, outstanding: 4, batch: true,
		durable: []durableCase{{2, 8}, {1, 1}}}
	if err := run(o); err != nil {
		t.Fatal(err)
	}

	one := options{api: st.APIURL, relay: st.RelayURL, size: 256, round: 200 * time.Millisecond, durable: []durableCase{{2, 8}}}
	e, err := setup(t.Context(), one, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	b := bench{name: "skytale", t: e, scrape: &scraper{url: ms.URL, http: ms.Client()}}
	r, err := durable(t.Context(), b, one, durableCase{2, 8})
	if err != nil {
		t.Fatal(err)
	}
	if r.perFlush < 1 {
		t.Fatalf("%.2f acks per flush over %.0f acks/s", r.perFlush, r.rate)
	}
}
