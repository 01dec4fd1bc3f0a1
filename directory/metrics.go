package directory

import (
	"context"
	"time"
)

// Metrics receives what the directory counts, for an operator's
// monitoring (Config.Metrics). Package directory/dirmetrics exports it to
// Prometheus; the directory itself links no metrics library.
//
// Every label the directory passes is a route pattern, a status code, the
// name of a rate limit or of what it counts (address, network, account),
// or a storage budget's scope (account, group, org, server): never a
// channel name, an account id or an address, so what an operator scrapes
// says how busy the directory is, not who uses it. The methods are called
// from request goroutines at once; they must be safe for that and must
// not block.
type Metrics interface {
	// Watch is called once, by New, with the server whose state the
	// gauges read when they are collected ([Server.BackendUp],
	// [Server.BudgetUse]). An error fails New: a Metrics serves one
	// directory.
	Watch(s *Server) error
	// Request counts one answered request: its route pattern ("none"
	// for a path no route matches), its status code and how long it
	// took.
	Request(route string, code int, d time.Duration)
	// RateLimited counts a request refused by the rate limit named limit
	// ("token", "sign-up", …), and by what it counts ("address",
	// "network" or "account").
	RateLimited(limit, by string)
	// QuotaRefused counts a put refused with quota_exceeded, by the
	// scope of the storage budget it would have passed.
	QuotaRefused(scope string)
	// BackendError counts a request answered 500 internal.
	BackendError()
	// Revoked counts a revocation recorded.
	Revoked()
	// Swept counts a run of the background sweep and the rows it
	// deleted.
	Swept(rows int64)
}

// metrics is the Config.Metrics a Server records to; the zero value
// records nothing.
type metrics struct{ m Metrics }

func (m metrics) request(route string, code int, d time.Duration) {
	if m.m == nil {
		return
	}
	if route == "" {
		route = "none"
	}
	m.m.Request(route, code, d)
}

func (m metrics) refusal(kind limitKind, by string) {
	if m.m != nil {
		m.m.RateLimited(limitNames[kind], by)
	}
}

func (m metrics) backendError() {
	if m.m != nil {
		m.m.BackendError()
	}
}

func (m metrics) revocation() {
	if m.m != nil {
		m.m.Revoked()
	}
}

func (m metrics) sweep(rows int64) {
	if m.m != nil {
		m.m.Swept(rows)
	}
}

func (m metrics) quotaRefusal(scope string) {
	if m.m != nil {
		m.m.QuotaRefused(scope)
	}
}

// BackendUp reports whether the database answers: the check GET /ready
// makes, shared for a second (an older result is checked again). It is
// false once Close has begun.
func (s *Server) BackendUp() bool { return s.Ready(context.Background()) == nil }

// BudgetUse is what one scope of the storage budgets holds. It counts
// holders and bytes, never says who they are.
type BudgetUse struct {
	// Scope is account, group, org or server.
	Scope string
	// Limit is the budget of each holder of the scope (of the whole
	// directory for server).
	Limit int64
	// Holders is how many accounts, signup groups or orgs hold bytes,
	// and Near how many of them are at 90% of their budget or more;
	// both 0 for server.
	Holders, Near int64
	// Largest is the bytes of the largest holder; for server, the bytes
	// the whole directory keeps.
	Largest int64
}

// BudgetUse reads the storage ledger: one entry per scope, from the
// narrowest (account) to server. When the database does not answer it
// returns the error and, still, every scope's Limit.
func (s *Server) BudgetUse(ctx context.Context) ([]BudgetUse, error) {
	st := s.store
	use := make([]BudgetUse, len(budgetScopes))
	for i, scope := range budgetScopes {
		use[i] = BudgetUse{Scope: scope, Limit: st.budgets.limit(scope)}
	}
	u, err := st.budgetUse(ctx)
	if err != nil {
		return use, err
	}
	for i := range use {
		use[i].Largest = u.largest[i]
		if use[i].Scope != scopeServer {
			use[i].Holders, use[i].Near = u.holders[i], u.near[i]
		}
	}
	return use, nil
}
