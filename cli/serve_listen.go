package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/skytale-oss/skytale/internal/admin"
	"github.com/skytale-oss/skytale/internal/clientaddr"
	"github.com/skytale-oss/skytale/internal/httpx"
)

// The listeners of tally serve: the public ones of the planes, and the
// metrics and health listeners beside them.

// listener wraps a plane's TCP listener and makes its HTTP server: the
// PROXY header from trusted proxies (--proxy-protocol) first, so the caps
// see the clients, then the connection caps. The health listener has a
// small cap of its own and short timeouts, and neither per-address caps
// nor PROXY headers: it is for the operator's load balancer or monitor,
// not the public.
func (o *serveOptions) listener(p plane, tl net.Listener, maxConns int) (*httpx.LimitListener, *http.Server) {
	if p.name == "health" {
		ln := httpx.NewLimitListener(tl, httpx.LimitOptions{Max: healthMaxConns})
		return ln, &http.Server{Handler: p.h, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
			WriteTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 8 << 10, ConnState: ln.ConnState}
	}
	var base net.Listener = tl
	if o.ProxyProtocol {
		base = clientaddr.NewListener(tl, o.TrustedProxies, 0)
	}
	// A TLS proxy on loopback carries every client, as does a trusted
	// proxy that does not send PROXY headers.
	exempt := netip.Addr.IsLoopback
	if len(o.TrustedProxies) > 0 {
		trusted := o.TrustedProxies
		exempt = func(a netip.Addr) bool { return clientaddr.Trusted(trusted, a) }
	}
	ln := httpx.NewLimitListener(base, httpx.LimitOptions{
		Max: maxConns, MaxPerAddr: o.MaxConnsPerIP, MaxPerNet: o.MaxConnsPerNet, MaxIdlePerAddr: o.MaxIdlePerIP,
		ExemptAddr: exempt,
	})
	// The deadlines hold until a WebSocket takes the connection over:
	// net/http clears them when the relay hijacks it, and the relay
	// sets its own per write.
	return ln, &http.Server{
		Handler:           p.h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnState:         ln.ConnState,
	}
}

// healthMaxConns bounds the health listener's connections: room for a
// few monitors and a load balancer's checks from each of its nodes, while
// a flood that reached this listener too could hold no more than 64 file
// descriptors.
const healthMaxConns = 64

// metricsMaxConns bounds the metrics listener's: its scrapers and the
// operator's admin page.
const metricsMaxConns = 256

// healthHandler answers GET /health on the health listener: the relay's
// answer when it runs here, else the directory's; and GET /ready: 200
// when every plane served here is ready, else 503 naming the first that
// is not. Neither takes a lock or a limiter that a flood of connections
// contends.
func healthHandler(planes []plane) http.Handler {
	h := planes[0].h
	var ready []*planeHandler
	for _, p := range planes {
		if p.name == "relay" {
			h = p.h
		}
		if ph, ok := p.h.(*planeHandler); ok {
			ready = append(ready, ph)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /health", h)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		for _, p := range ready {
			if err := p.Ready(r.Context()); err != nil {
				w.Header().Set("Retry-After", "1")
				httpx.WriteError(w, http.StatusServiceUnavailable, "unavailable", p.name+" not ready: "+err.Error())
				return
			}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	return mux
}

// sidePlanes adds the listeners apart from the public ones: the metrics
// (with /health, /ready and the admin page, for whoever scrapes them and
// the operator) and the health listener.
func (o *serveOptions) sidePlanes(planes []plane, reg *prometheus.Registry, internal []byte, ring *admin.ErrorRing, started time.Time) []plane {
	health := healthHandler(planes)
	if reg != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("GET /health", health)
		mux.Handle("GET /ready", health)
		adm := o.adminPage(planes, internal, reg, ring, started)
		mux.Handle("/admin", adm)
		mux.Handle("/admin/", adm)
		planes = append(planes, plane{name: "metrics", addr: o.MetricsAddr, h: mux})
	}
	if o.HealthAddr != "" {
		planes = append(planes, plane{name: "health", addr: o.HealthAddr, h: health})
	}
	return planes
}

// listen serves each plane on its address in g until ctx is done, then
// shuts its server down; it logs each URL as it listens. A listener that
// cannot be opened is an error, and the ones opened stop with g.
func (o *serveOptions) listen(ctx context.Context, g *errgroup.Group, planes []plane, caps map[string]int, log *slog.Logger) error {
	for _, p := range planes {
		tl, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		ln, srv := o.listener(p, tl, caps[p.name])
		url := "http://" + tl.Addr().String()
		attrs := []any{"url", url}
		if p.name == "directory" {
			attrs = append(attrs, "signup", string(o.signupMode()))
		}
		if p.name != "health" {
			attrs = append(attrs, "max_conns", caps[p.name])
		}
		if p.name == "relay" && benchNoFlush {
			log.Warn("benchmark build: the relay's archive does not fsync, so an ack survives no crash of the machine")
		}
		log.Info(p.name+" listening", attrs...)
		if o.listening != nil {
			o.listening(p.name, url)
		}
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			// Shutdown does not wait for hijacked (WebSocket) connections;
			// the relay's Close, run after, ends those.
			return srv.Shutdown(sctx)
		})
	}
	return nil
}
