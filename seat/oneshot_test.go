package seat_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// wire records what a seat's traffic looks like from the servers' side:
// each relay WebSocket connection's lifetime, and the requests either
// plane served between the opening of the connection before it and its
// own opening.
type wire struct {
	mu      sync.Mutex
	pending []string
	conns   []*wireConn
}

type wireConn struct {
	open, close time.Time
	before      []string
}

// front puts a recording proxy in front of the plane at target.
func (w *wire) front(t *testing.T, plane, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if plane == "relay" && strings.HasPrefix(r.URL.Path, "/ws") {
			c := &wireConn{open: time.Now()}
			w.mu.Lock()
			c.before, w.pending = w.pending, nil
			w.conns = append(w.conns, c)
			w.mu.Unlock()
			proxy.ServeHTTP(rw, r)
			w.mu.Lock()
			c.close = time.Now()
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		w.pending = append(w.pending, plane+" "+r.Method+" "+r.URL.Path)
		w.mu.Unlock()
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// closed returns the connections opened from the i-th on that have
// closed, and how many have opened in all.
func (w *wire) closed(from int) (cs []wireConn, opened int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.conns[min(from, len(w.conns)):] {
		if !c.close.IsZero() {
			cs = append(cs, *c)
		}
	}
	return cs, len(w.conns)
}

// bestThreshold is the accuracy of the best classifier by one threshold
// on x (either direction) telling a from b.
func bestThreshold(a, b []float64) float64 {
	type pt struct {
		x float64
		a bool
	}
	var pts []pt
	for _, x := range a {
		pts = append(pts, pt{x, true})
	}
	for _, x := range b {
		pts = append(pts, pt{x, false})
	}
	slices.SortFunc(pts, func(p, q pt) int {
		switch {
		case p.x < q.x:
			return -1
		case p.x > q.x:
			return 1
		}
		return 0
	})
	best, n := 0.5, float64(len(pts))
	aBelow, bBelow := 0, 0
	for _, p := range pts {
		if p.a {
			aBelow++
		} else {
			bBelow++
		}
		// "a below the threshold", and its mirror.
		acc := float64(aBelow+len(b)-bBelow) / n
		best = max(best, acc, 1-acc)
	}
	return best
}

// bestBySequence is the accuracy of the classifier that names, for each
// sequence of requests, the class that had it most often.
func bestBySequence(a, b []string) float64 {
	count := map[string][2]int{}
	for _, s := range a {
		c := count[s]
		c[0]++
		count[s] = c
	}
	for _, s := range b {
		c := count[s]
		c[1]++
		count[s] = c
	}
	right := 0
	for _, c := range count {
		right += max(c[0], c[1])
	}
	return float64(right) / float64(len(a)+len(b))
}

// TestOneShotSendsCannotBeToldFromCover plays the classifier at the
// servers' side: it records, in front of both planes, every relay
// connection of one home's seat, first while a watch runs (connections
// that carry only cover) and then for one-shot sends with no watch
// running, and tries to tell the two apart by a connection's lifetime
// (the best threshold) and by the requests before it. Neither does better
// than chance, within the margin that two samples of this size from one
// distribution stay within but once in a thousand runs (the two-sample
// Kolmogorov-Smirnov bound at 0.001: a best-threshold accuracy of
// 0.5 + D/2). Times are scaled down: cover every 10 ms on average, a
// connection lives 60 ms on average. The other member reads every message.
func TestOneShotSendsCannotBeToldFromCover(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 30
	}
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	var w wire
	apiURL, relayURL := w.front(t, "directory", st.APIURL), w.front(t, "relay", st.RelayURL)
	cfg := cover.Config{MeanInterval: 10 * time.Millisecond, MeanLifetime: 60 * time.Millisecond}
	s, err := seat.Open(ctx, seat.Config{Home: alice.home, APIURL: apiURL, RelayURL: relayURL, Cover: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })

	// Cover only: a watch's connections (the first, opened after the
	// watch's own start-up, left out).
	wt := startWatch(t, s, room)
	var coverConns []wireConn
	waitfor.Nil(t, time.Minute, func() error {
		cs, _ := w.closed(1)
		if len(cs) >= n {
			coverConns = cs[:n]
			return nil
		}
		return fmt.Errorf("the watch closed %d connections in a minute, want %d: it does not open them again after a lifetime", len(cs), n)
	})
	wt.stop()
	// Let the watch's last connection close before the sends begin.
	waitfor.True(t, time.Minute, func() bool { cs, opened := w.closed(0); return len(cs) == opened },
		"the watch's last connection is still open a minute after it stopped")

	// One-shot sends, no watch running (the first left out as well).
	_, first := w.closed(0)
	var want []string
	for i := range n + 1 {
		text := fmt.Sprintf("one-shot %d", i)
		want = append(want, text)
		if _, err := s.Room(room).Send(ctx, text); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	var sendConns []wireConn
	waitfor.True(t, time.Minute, func() bool {
		cs, opened := w.closed(first + 1)
		if opened-first < n+1 {
			t.Fatalf("%d sends opened %d connections", n+1, opened-first)
		}
		sendConns = cs
		return len(cs) == opened-first-1
	}, "the sends' connections are still open a minute after the last send")

	var lifeC, lifeS []float64
	var seqC, seqS []string
	for _, c := range coverConns {
		lifeC = append(lifeC, c.close.Sub(c.open).Seconds())
		seqC = append(seqC, strings.Join(c.before, ", "))
	}
	for _, c := range sendConns {
		lifeS = append(lifeS, c.close.Sub(c.open).Seconds())
		seqS = append(seqS, strings.Join(c.before, ", "))
	}
	nc, ns := float64(len(lifeC)), float64(len(lifeS))
	margin := 1.95 * math.Sqrt((nc+ns)/(nc*ns)) / 2 // KS at 0.001, as an accuracy over 0.5
	if acc := bestThreshold(lifeC, lifeS); acc > 0.5+margin {
		t.Errorf("a threshold on the lifetime tells one-shot sends from cover with accuracy %.2f (chance 0.5, margin %.2f)", acc, margin)
	}
	if acc := bestBySequence(seqC, seqS); acc > 0.5+margin {
		t.Errorf("the requests before a connection tell one-shot sends from cover with accuracy %.2f (chance 0.5, margin %.2f):\ncover %q\nsends %q", acc, margin, seqC[:3], seqS[:3])
	}
	t.Logf("before a cover connection: %q; before a send's: %q", seqC[0], seqS[0])
	t.Logf("%d cover connections, %d send connections; margin %.2f; lifetime accuracy %.2f, request accuracy %.2f",
		len(lifeC), len(lifeS), margin, bestThreshold(lifeC, lifeS), bestBySequence(seqC, seqS))
	expect(t, "bob", received(t, bob, room), want...)
}

// TestOneShotSendRefusedAsBefore: a one-shot send on a connection of a
// watch's shape is refused as a send of its own is: a room the home does
// not have, and a room its member was removed from, both before the
// connection's lifetime is over; and the removed member's frame reaches
// no one.
func TestOneShotSendRefusedAsBefore(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	cfg := cover.Config{MeanInterval: 10 * time.Millisecond, MeanLifetime: time.Hour}
	s, err := seat.Open(ctx, seat.Config{Home: bob.home, APIURL: st.APIURL, RelayURL: st.RelayURL, Cover: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	if _, err := s.Room("acme/rooms/nowhere").Send(ctx, "hi"); !errors.Is(err, seat.ErrNoRoom) {
		t.Fatalf("a send to a room the home does not have: %v", err)
	}
	if err := removeFrom(alice, ctx, room, bob.did); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute) // far less than the lifetime's hour
	defer cancel()
	if _, err := s.Room(room).Send(sctx, "still here?"); err == nil || sctx.Err() != nil {
		t.Fatalf("a removed member's one-shot send: %v (context %v)", err, sctx.Err())
	}
	for _, m := range received(t, alice, room) {
		if m == "still here?" {
			t.Fatal("the removed member's message reached the room")
		}
	}
}
