package cli

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/internal/httpx"
)

// natsRetry is how often a relay waiting for NATS tries again.
const natsRetry = 2 * time.Second

// planeServer is a plane's server once it is built.
type planeServer interface {
	http.Handler
	Ready(ctx context.Context) error
}

// planeHandler serves a plane: its server once built, and until then
// (a relay waiting for NATS) answers of its own: GET /health 200, for the
// process lives, and 503 unavailable with Retry-After for GET /ready and
// everything else.
type planeHandler struct {
	name  string
	start time.Time
	srv   atomic.Pointer[planeServer]
	why   atomic.Pointer[string] // why the server is not built yet
}

func (p *planeHandler) set(s planeServer)  { p.srv.Store(&s) }
func (p *planeHandler) waiting(why string) { p.why.Store(&why) }

func (p *planeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := p.srv.Load(); s != nil {
		(*s).ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/health" {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "uptime": int64(time.Since(p.start) / time.Second)})
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(natsRetry/time.Second)))
	httpx.WriteError(w, http.StatusServiceUnavailable, "unavailable", p.name+" is starting: "+p.reason())
}

func (p *planeHandler) reason() string {
	if why := p.why.Load(); why != nil {
		return *why
	}
	return "not built yet"
}

// Ready is the built server's readiness.
func (p *planeHandler) Ready(ctx context.Context) error {
	if s := p.srv.Load(); s != nil {
		return (*s).Ready(ctx)
	}
	return errors.New(p.reason())
}

// trackingRegisterer registers on reg and remembers what, so that undo
// can take it off again.
type trackingRegisterer struct {
	reg *prometheus.Registry
	cs  []prometheus.Collector
}

func (t *trackingRegisterer) Register(c prometheus.Collector) error {
	if err := t.reg.Register(c); err != nil {
		return err
	}
	t.cs = append(t.cs, c)
	return nil
}

func (t *trackingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackingRegisterer) Unregister(c prometheus.Collector) bool { return t.reg.Unregister(c) }

func (t *trackingRegisterer) undo() {
	for _, c := range t.cs {
		t.reg.Unregister(c)
	}
	t.cs = nil
}

// quietHandler drops the planes' request lines (--quiet) and passes
// everything else on: warnings and errors, and the lines about the
// process itself.
type quietHandler struct{ slog.Handler }

// requestLine reports whether msg is one of the planes' per-request log
// lines.
func requestLine(msg string) bool { return msg == "request" || msg == "relay: request" }

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if requestLine(r.Message) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
