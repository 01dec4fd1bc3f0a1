package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/skytale-oss/skytale/internal/httpx"
)

// Readiness. GET /health says the process serves (liveness); GET /ready
// says whether this node can do its job now, so that a load balancer
// sends clients elsewhere while it cannot. A node is ready when
//
//   - its archive takes publishes: on JetStream, the NATS connection is
//     up and the stream answers; on SQLite, no write has failed (a failed
//     write stops the archive until a restart);
//   - each directory feed it follows (revocations, channel members) was
//     read up to its end within Config.ReadyFeedLag, so that removals and
//     revocations take effect here as on the other nodes.
//
// GET /ready: anyone may call it, as /health; it acts on nothing and
// stores nothing; it answers 200 {"status":"ready"} or 503
// {"error":"unavailable","message":…} (with Retry-After) naming the
// check that failed, never a backend's address or error text. The
// JetStream check is one request to NATS shared by every caller for a
// second, so a crowd polling /ready costs NATS at most one request a
// second per node.

// DefaultReadyFeedLag is the default of Config.ReadyFeedLag.
const DefaultReadyFeedLag = 15 * time.Second

// readyCheckEvery is how long one JetStream check answers for.
const readyCheckEvery = time.Second

// Ready returns nil when the relay can do its job (see GET /ready), else
// what keeps it from it.
func (s *Server) Ready(ctx context.Context) error {
	if s.gate.Closed() {
		return errors.New("the relay is shutting down")
	}
	if err := s.arch.Ready(ctx); err != nil {
		return err
	}
	now := time.Now()
	for _, p := range s.feeds() {
		if lag := p.lag(now, s.start); lag > s.cfg.ReadyFeedLag {
			return fmt.Errorf("the directory's %s feed was last read in full %v ago (bound %v)", p.name, lag.Round(time.Second), s.cfg.ReadyFeedLag)
		}
	}
	return nil
}

// feeds returns the health of the directory feeds the relay follows.
func (s *Server) feeds() []*feedHealth {
	var fs []*feedHealth
	if s.cfg.Revocations != nil {
		fs = append(fs, &s.rev.health)
	}
	if s.mem != nil {
		fs = append(fs, &s.mem.health)
	}
	return fs
}

// feedHealth is how a feed poller fares, for readiness and the metrics.
type feedHealth struct {
	name  string
	okAt  atomic.Int64  // when the last round that read the feed to its end started (Unix ns; 0: none yet)
	fails atomic.Uint64 // rounds that ended in an error
}

// lag is how long ago the feed was last read to its end (since start,
// the relay's, when it never was).
func (h *feedHealth) lag(now, start time.Time) time.Duration {
	if ok := h.okAt.Load(); ok != 0 {
		return max(now.Sub(time.Unix(0, ok)), 0)
	}
	return max(now.Sub(start), 0)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if err := s.Ready(r.Context()); err != nil {
		s.logRequest(r, http.StatusServiceUnavailable)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "not ready: "+err.Error())
		return
	}
	s.logRequest(r, http.StatusOK)
	httpx.WriteJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ready"})
}
