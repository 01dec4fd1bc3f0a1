package directory

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Readiness. GET /health says the process serves (liveness); GET /ready
// says whether the directory can do its job now: its database answers.
// Anyone may call it, as /health; it acts on nothing and stores nothing;
// it answers 200 {"status":"ready"} or 503 {"error":"unavailable",
// "message":…} with Retry-After, never the database's address or error
// text. One check (a ping with a deadline of dbCheckTimeout) answers for
// every caller for a second, so a crowd polling /ready costs the database
// at most one ping a second.

const (
	dbCheckEvery   = time.Second
	dbCheckTimeout = 2 * time.Second
)

// dbCheck is the shared result of the database check.
type dbCheck struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// Ready returns nil when the directory can do its job (see GET /ready),
// else what keeps it from it.
func (s *Server) Ready(ctx context.Context) error {
	if s.gate.Closed() {
		return errors.New("the directory is shutting down")
	}
	c := &s.dbCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < dbCheckEvery {
		return c.err
	}
	pctx, cancel := context.WithTimeout(ctx, dbCheckTimeout)
	defer cancel()
	err := s.store.db.PingContext(pctx)
	if err != nil && ctx.Err() != nil {
		return errors.New("the request ended") // the caller's, not the database's
	}
	c.err = nil
	if err != nil {
		c.err = errors.New("the database does not answer")
	}
	c.at = time.Now()
	return c.err
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if err := s.Ready(r.Context()); err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "not ready: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
