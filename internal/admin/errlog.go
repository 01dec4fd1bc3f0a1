package admin

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/internal/redact"
)

// ErrorRing keeps the last error log records for the page: a bounded
// ring, so a storm of errors costs the same memory as a few. Unless it is
// made to name clients, it drops the attributes that say who a client is
// or where it talks (as the planes' logs do), so the page names no one
// the default logs would not.
type ErrorRing struct {
	mu      sync.Mutex
	records []ErrorRecord // ring of at most cap(records)
	next    int           // where the next record goes once full
	total   uint64        // records ever kept
	clients bool
}

// ErrorRecord is one error log record as the page shows it.
type ErrorRecord struct {
	Time    time.Time
	Message string
	Attrs   string // key=value pairs, in the order logged
}

// NewErrorRing keeps the last n error records (n at least 1); clients
// keeps client addresses, account ids and channels in them (tally serve
// --log-clients).
func NewErrorRing(n int, clients bool) *ErrorRing {
	return &ErrorRing{records: make([]ErrorRecord, 0, max(1, n)), clients: clients}
}

// Handler passes every record to next and keeps those at slog.LevelError
// or above.
func (e *ErrorRing) Handler(next slog.Handler) slog.Handler {
	return &ringHandler{next: next, keep: redact.Handler(&keepHandler{ring: e}, e.clients)}
}

// Recent returns the kept records, newest first, and how many were ever
// kept.
func (e *ErrorRing) Recent() ([]ErrorRecord, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]ErrorRecord, 0, len(e.records))
	for i := range len(e.records) {
		// Newest first: the one before next, going back.
		j := (e.next - 1 - i + 2*len(e.records)) % len(e.records)
		if len(e.records) < cap(e.records) {
			j = len(e.records) - 1 - i
		}
		out = append(out, e.records[j])
	}
	return out, e.total
}

func (e *ErrorRing) add(r ErrorRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.total++
	if len(e.records) < cap(e.records) {
		e.records = append(e.records, r)
		return
	}
	e.records[e.next] = r
	e.next = (e.next + 1) % len(e.records)
}

// ringHandler tees records to the log and, at error level, to the ring.
type ringHandler struct {
	next, keep slog.Handler
}

func (h *ringHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || h.next.Enabled(ctx, l)
}

func (h *ringHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.keep.Handle(ctx, r.Clone())
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *ringHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &ringHandler{next: h.next.WithAttrs(as), keep: h.keep.WithAttrs(as)}
}

func (h *ringHandler) WithGroup(name string) slog.Handler {
	return &ringHandler{next: h.next.WithGroup(name), keep: h.keep.WithGroup(name)}
}

// keepHandler formats records into the ring.
type keepHandler struct {
	ring   *ErrorRing
	prefix string // the open groups, "a.b."
	attrs  []string
}

func (h *keepHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *keepHandler) Handle(_ context.Context, r slog.Record) error {
	parts := append([]string(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		parts = appendAttr(parts, h.prefix, a)
		return true
	})
	h.ring.add(ErrorRecord{Time: r.Time, Message: r.Message, Attrs: strings.Join(parts, " ")})
	return nil
}

func (h *keepHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &keepHandler{ring: h.ring, prefix: h.prefix, attrs: append([]string(nil), h.attrs...)}
	for _, a := range as {
		n.attrs = appendAttr(n.attrs, h.prefix, a)
	}
	return n
}

func (h *keepHandler) WithGroup(name string) slog.Handler {
	return &keepHandler{ring: h.ring, prefix: h.prefix + name + ".", attrs: h.attrs}
}

// appendAttr appends a (groups flattened as a.b=v) to parts.
func appendAttr(parts []string, prefix string, a slog.Attr) []string {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			parts = appendAttr(parts, prefix+a.Key+".", g)
		}
		return parts
	}
	if a.Key == "" {
		return parts
	}
	return append(parts, fmt.Sprintf("%s%s=%s", prefix, a.Key, v.String()))
}
