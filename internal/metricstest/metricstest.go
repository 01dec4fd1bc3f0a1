// Package metricstest reads Prometheus metrics back, for tests.
package metricstest

import (
	"net/http/httptest"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// T is the part of testing.TB these helpers use (the package does not
// import testing: library code of this module never does).
type T interface {
	Helper()
	Fatal(args ...any)
}

// Value is the value of the counter or gauge name whose labels include
// labels (name, value pairs), as reg gathers it; -1 when there is none.
func Value(t T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// Labels calls f with every metric name, label name and label value reg
// gathers.
func Labels(t T, reg *prometheus.Registry, f func(metric, label, value string)) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				f(fam.GetName(), l.GetName(), l.GetValue())
			}
		}
	}
}

// Exposition is the text GET /metrics serves of reg, with the value of
// each sample line for which masked is true replaced by "_" (values that
// depend on timing); nil masks none.
func Exposition(t T, reg *prometheus.Registry, masked func(line string) bool) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(rec.Body.String()), "\n") {
		if !strings.HasPrefix(line, "#") && masked != nil && masked(line) {
			line = line[:strings.LastIndexByte(line, ' ')] + " _"
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// Golden checks that got is the content of the file at path, which it
// first rewrites with got when update is set (a test's -update flag, once
// a change of the metrics is meant). Operators' alerts and dashboards
// read these names: a change here breaks them.
func Golden(t interface {
	T
	Errorf(format string, args ...any)
}, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("GET /metrics changed (go test -update rewrites %s once the change is meant):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
