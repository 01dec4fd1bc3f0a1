package seat_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// heldWriter is the answer to a client that does not take it: every write
// waits until release is closed, so the directory's handler (and the read
// gate's slot it holds) stays busy until then. held is closed at the first
// write.
type heldWriter struct {
	http.ResponseWriter
	held, release chan struct{}
	once          *sync.Once
}

func (w heldWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.held) })
	<-w.release
	return w.ResponseWriter.Write(b)
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// inboxWatch serves st's directory and counts the GETs of /v1/inbox that
// are not held, and the 429s among them; a request with the header
// X-Test-Hold is held (heldWriter) until the first 429, or until the test
// ends.
type inboxWatch struct {
	reads, refused atomic.Int32
	held, release  chan struct{}
	holdOnce       sync.Once
	releaseOnce    sync.Once
}

func newInboxWatch(t *testing.T, dir http.Handler) (*inboxWatch, string) {
	w := &inboxWatch{held: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Hold") != "" {
			dir.ServeHTTP(heldWriter{rw, w.held, w.release, &w.holdOnce}, r)
			return
		}
		if r.Method != "GET" || r.URL.Path != "/v1/inbox" {
			dir.ServeHTTP(rw, r)
			return
		}
		sw := &statusWriter{ResponseWriter: rw, status: 200}
		dir.ServeHTTP(sw, r)
		w.reads.Add(1)
		if sw.status == http.StatusTooManyRequests {
			w.refused.Add(1)
			w.releaseOnce.Do(func() { close(w.release) })
		}
	}))
	t.Cleanup(func() {
		w.releaseOnce.Do(func() { close(w.release) })
		srv.Close()
	})
	return w, srv.URL
}

// TestReadGateRefusalIsRetried: the directory's only server-wide read
// slot is held by a stranger's read whose answer is not being taken. A
// seat's read of its pending rooms waits for the slot, is refused 429
// rate_limited with a Retry-After, and the seat sends it again after that
// wait instead of handing the refusal to its user: the person sees their
// (empty) pending rooms, and the directory saw exactly two reads.
func TestReadGateRefusalIsRetried(t *testing.T) {
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{
		Limits: directory.Limits{ReadBytes: 4 << 20}, // one read of the whole server in flight
	}})
	watch, apiURL := newInboxWatch(t, st.Directory)
	alice := newMemberAt(t, st, apiURL, "acme")
	stranger := st.NewAccount(t, "evilcorp")

	go func() {
		req, _ := http.NewRequest("GET", apiURL+"/v1/inbox", nil)
		req.Header.Set("Authorization", "Bearer "+stranger.APIKey)
		req.Header.Set("X-Test-Hold", "1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-watch.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the stranger's read never started its answer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pending, err := alice.PendingRooms(ctx)
	if err != nil {
		t.Fatalf("pending rooms while the read gate is full: %v", err)
	}
	if len(pending) != 0 {
		t.Fatalf("pending rooms: %+v", pending)
	}
	if r, n := watch.refused.Load(), watch.reads.Load(); r != 1 || n != 2 {
		t.Fatalf("the directory refused %d of the seat's %d reads; want 1 of 2", r, n)
	}
}

// TestLongRetryAfterIsNotWaited: a read refused with a Retry-After longer
// than the seat waits for (here the account's read bucket, refilled once an
// hour) is handed to the caller at once as the 429, after one request.
func TestLongRetryAfterIsNotWaited(t *testing.T) {
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{
		Limits: directory.Limits{Read: directory.Rate{PerAccount: directory.Bucket{Burst: 1, Every: time.Hour}}},
	}})
	watch, apiURL := newInboxWatch(t, st.Directory)
	alice := newMemberAt(t, st, apiURL, "acme")
	ctx := context.Background()
	// Signing in restocked the seat's join offers, which read the stock:
	// the bucket may be empty already; drain it if not.
	alice.PendingRooms(ctx)
	before := watch.reads.Load()
	_, err := alice.PendingRooms(ctx)
	var ae *seat.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Code != "rate_limited" {
		t.Fatalf("a read past the account's read bucket: %v", err)
	}
	if n := watch.reads.Load() - before; n != 1 {
		t.Fatalf("the seat sent the refused read %d times; want once", n)
	}
}
