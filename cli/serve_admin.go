package cli

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/internal/admin"
)

// adminErrors is how many error log records the admin page keeps.
const adminErrors = 50

// adminPage is the admin page of the planes, for the metrics listener
// (never a public one): behind the internal secret, it reads readiness
// from the planes' handlers, the accounts from the directory's operator
// endpoints, the counts from reg and the errors from ring.
func (o *serveOptions) adminPage(planes []plane, internal []byte, reg prometheus.Gatherer, ring *admin.ErrorRing, started time.Time) http.Handler {
	cfg := admin.Config{Secret: internal, Metrics: reg, Errors: ring, Version: versionString(), Started: started}
	for _, p := range planes {
		ph, ok := p.h.(*planeHandler)
		if !ok {
			continue
		}
		cfg.Planes = append(cfg.Planes, admin.Plane{Name: p.name, Ready: ph.Ready})
		if p.name == "directory" {
			cfg.Accounts = admin.DirectoryAccounts(ph, internal)
		}
	}
	return admin.New(cfg)
}
