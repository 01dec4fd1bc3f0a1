// Package metricstest reads Prometheus metrics back, for tests.
package metricstest

import "github.com/prometheus/client_golang/prometheus"

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
