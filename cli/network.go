package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"

	"github.com/coder/websocket"
)

// The addresses `tally serve` listens on by default, which are also the
// URLs tally uses when none is configured.
const (
	defaultAPIAddr   = "127.0.0.1:3100"
	defaultRelayAddr = "127.0.0.1:8443"
)

// testOnlyDefaultURLs, when set, replaces the default directory and relay
// URLs, so tests can point the defaults at an in-process stack.
var testOnlyDefaultURLs *[2]string

func defaultURLs() (api, relay string) {
	if testOnlyDefaultURLs != nil {
		return testOnlyDefaultURLs[0], testOnlyDefaultURLs[1]
	}
	return "http://" + defaultAPIAddr, "http://" + defaultRelayAddr
}

// hookTransport lets the command tree see the seat's requests: it says
// once that a default URL is in use when a request first goes there, and
// tells a command when a request of interest goes out.
type hookTransport struct {
	base http.RoundTripper

	mu      sync.Mutex
	notices map[string]func() // by scheme://host, run before the first request there
	onReq   func(*http.Request)
}

func (t *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	key := r.URL.Scheme + "://" + r.URL.Host
	if r.URL.Scheme == "ws" || r.URL.Scheme == "wss" {
		key = "http" + strings.TrimPrefix(r.URL.Scheme, "ws") + "://" + r.URL.Host
	}
	notice := t.notices[key]
	delete(t.notices, key)
	onReq := t.onReq
	t.mu.Unlock()
	if notice != nil {
		notice()
	}
	if onReq != nil {
		onReq(r)
	}
	return t.base.RoundTrip(r)
}

// unreachable reports the URL a request could not connect to: nothing
// listens there, or no route leads there.
func unreachable(err error) (string, error, bool) {
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) && !(errors.As(err, &op) && op.Op == "dial") {
		return "", nil, false
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return "", nil, false
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil {
		return ue.URL, ue.Err, true
	}
	return u.Scheme + "://" + u.Host, ue.Err, true
}

// netHint turns a failed connection into a line that names the URL and
// what to do, or returns nil.
func (e *env) netHint(err error) error {
	base, cause, ok := unreachable(err)
	if !ok {
		return nil
	}
	plane, key := "the server", "api_url"
	switch base {
	case strings.TrimRight(e.apiURL, "/"):
		plane = "the directory"
	case strings.TrimRight(e.relayURL, "/"):
		plane, key = "the relay", "relay_url"
	}
	what := "nothing is listening at " + base
	if !errors.Is(err, syscall.ECONNREFUSED) {
		what = fmt.Sprintf("cannot reach %s (%v)", base, rootCause(cause))
	}
	return &usageError{fmt.Sprintf("%s (%s)", what, plane),
		"start one with `tally serve`, or point tally at yours with `tally config set " + key + " URL`"}
}

// rootCause is the innermost error of a chain of single wraps.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// closedHint describes a WebSocket the relay closed, or returns nil.
func closedHint(err error) error {
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return errors.New("the connection to the relay dropped")
		}
		return nil
	}
	why := ce.Reason
	if why == "" {
		why = strings.TrimPrefix(ce.Code.String(), "Status")
	}
	return fmt.Errorf("the relay closed the connection: %s", why)
}
