// Package redact keeps people out of the servers' logs.
//
// Both planes log through [Handler]: unless the operator asked for client
// logging (tally serve --log-clients), it drops every attribute that says
// who a client is or where it talks: client addresses, account ids,
// identities and channel names. Request paths are logged as their route
// pattern ([Path]), since a path can hold a channel name or a request id.
// What remains is what an operator needs to run the server: events,
// status codes, durations, counts and errors.
package redact

import (
	"context"
	"log/slog"
)

// personKeys are the attribute keys that name a person or a place. A log
// site that names one uses one of these keys, so it is dropped here.
var personKeys = map[string]bool{
	"remote":   true, // IP:port of the connection
	"client":   true, // the client address a proxy forwarded for
	"sub":      true, // account id (JWT subject)
	"account":  true,
	"identity": true, // a seat's did:key
	"channel":  true,
}

// IsPerson reports whether key is one that [Handler] drops.
func IsPerson(key string) bool { return personKeys[key] }

// Handler returns h itself when clients is true, and otherwise a handler
// that passes every record to h without its person attributes.
func Handler(h slog.Handler, clients bool) slog.Handler {
	if clients {
		return h
	}
	return &handler{h: h}
}

// Path is what a log line says of a request's path: the path itself when
// clients are logged, else the route pattern that matched it (without
// the method), or "-" when none did.
func Path(clients bool, path, pattern string) string {
	if clients {
		return path
	}
	if pattern == "" {
		return "-"
	}
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == ' ' {
			return pattern[i+1:]
		}
	}
	return pattern
}

type handler struct{ h slog.Handler }

func (d *handler) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, l) }

func (d *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a, ok := keep(a); ok {
			out.AddAttrs(a)
		}
		return true
	})
	return d.h.Handle(ctx, out)
}

func (d *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var kept []slog.Attr
	for _, a := range as {
		if a, ok := keep(a); ok {
			kept = append(kept, a)
		}
	}
	return &handler{h: d.h.WithAttrs(kept)}
}

func (d *handler) WithGroup(name string) slog.Handler { return &handler{h: d.h.WithGroup(name)} }

// keep returns a without its person attributes (inside groups too), and
// whether anything is left.
func keep(a slog.Attr) (slog.Attr, bool) {
	if personKeys[a.Key] {
		return slog.Attr{}, false
	}
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup {
		return slog.Attr{Key: a.Key, Value: v}, true
	}
	var kept []slog.Attr
	for _, g := range v.Group() {
		if g, ok := keep(g); ok {
			kept = append(kept, g)
		}
	}
	if len(kept) == 0 {
		return slog.Attr{}, false
	}
	return slog.Attr{Key: a.Key, Value: slog.GroupValue(kept...)}, true
}
