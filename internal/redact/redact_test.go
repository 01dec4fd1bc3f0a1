package redact

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestHandlerDropsPeople(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), false)).With("sub", "acct-1", "plane", "relay")
	log.WithGroup("g").Info("event", "remote", "10.0.0.1:5", "channel", "acme/a/b", "n", 3,
		slog.Group("inner", "account", "acct-2", "identity", "did:key:z6", "ok", true))
	out := buf.String()
	for _, bad := range []string{"acct-1", "acct-2", "10.0.0.1", "acme/a/b", "did:key"} {
		if strings.Contains(out, bad) {
			t.Errorf("logged %q: %s", bad, out)
		}
	}
	for _, good := range []string{"plane=relay", "g.n=3", "g.inner.ok=true", "msg=event"} {
		if !strings.Contains(out, good) {
			t.Errorf("dropped %q: %s", good, out)
		}
	}

	buf.Reset()
	slog.New(Handler(slog.NewTextHandler(&buf, nil), true)).Info("event", "remote", "10.0.0.1:5")
	if !strings.Contains(buf.String(), "10.0.0.1") {
		t.Errorf("with clients on, the address was dropped: %s", buf.String())
	}
}

func TestPath(t *testing.T) {
	for _, c := range []struct {
		clients       bool
		path, pattern string
		want          string
	}{
		{false, "/ws/acme/ns/svc", "GET /ws/{org}/{ns}/{svc}", "/ws/{org}/{ns}/{svc}"},
		{false, "/nowhere", "", "-"},
		{true, "/ws/acme/ns/svc", "GET /ws/{org}/{ns}/{svc}", "/ws/acme/ns/svc"},
		{false, "/health", "/health", "/health"},
	} {
		if got := Path(c.clients, c.path, c.pattern); got != c.want {
			t.Errorf("Path(%v, %q, %q) = %q, want %q", c.clients, c.path, c.pattern, got, c.want)
		}
	}
}
