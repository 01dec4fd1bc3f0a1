// The scale cases: many subscribed connections, idle (what each costs the
// server's memory) or at a steady rate (the delivery latency of one
// message to all of them).

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// scale runs the idle and paced cases of a round for each bench in turn,
// the idle ones first.
func scale(ctx context.Context, o options, turn []bench, add func(bench, string, result)) error {
	for _, n := range o.idle {
		for _, b := range turn {
			r, err := idle(ctx, b, o, n)
			if err != nil {
				return fmt.Errorf("%s: idle %d: %w", b.name, n, err)
			}
			add(b, fmt.Sprintf("idle %d", n), r)
		}
	}
	for _, n := range o.active {
		for _, b := range turn {
			r, err := fanout(ctx, b.t, o, n, 0, o.rate)
			if errors.Is(err, errFellBehind) {
				// A figure of its own: this server cannot keep the pace,
				// and the others still run.
				fmt.Printf("%-10s paced 1→%d: %v\n", b.name, n, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: paced 1→%d: %w", b.name, n, err)
			}
			add(b, fmt.Sprintf("paced 1→%d at %g/s", n, o.rate), r)
		}
	}
	return nil
}

// idleSettle is how long the idle connections are held before the
// server's memory is read: long enough for its per-connection work
// (authentication, subscription, first pings) to end.
const idleSettle = 3 * time.Second

// baseMemory reads each bench's server memory before the run's first
// case: the idle case's baseline.
func baseMemory(o options, benches []bench) (map[string]int64, error) {
	base := map[string]int64{}
	for _, b := range benches {
		pid, ok := o.pids[b.name]
		if !ok {
			return nil, fmt.Errorf("idle: no -pid %s=PID", b.name)
		}
		n, err := rss(pid)
		if err != nil {
			return nil, err
		}
		base[b.name] = n
	}
	return base, nil
}

// idle opens n subscribers on b, holds them, and reads the server's
// resident memory per connection: what it holds with them open, less
// what it held before the run's first case. A server's runtime keeps
// memory freed in earlier rounds and reuses it, so a growth from the
// round's own start would read near zero after the first round; from the
// run's start every round reads the same, provided the idle case runs on
// fresh servers and first (run it alone for the memory figure: the
// fan-out cases of earlier rounds leave their buffers held).
func idle(ctx context.Context, b bench, o options, n int) (result, error) {
	base, ok := o.baseRSS[b.name]
	if !ok {
		return result{}, fmt.Errorf("no memory of %s before the first case (-pid %s=PID)", b.name, b.name)
	}
	subs, err := b.t.subscribers(ctx, n)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, s := range subs {
			s.close()
		}
	}()
	time.Sleep(idleSettle) // time for the server to settle, not an event
	after, err := rss(o.pids[b.name])
	if err != nil {
		return result{}, err
	}
	grown := after - base
	return result{rate: float64(grown) / float64(n), unit: "B/connection", conns: n, grown: grown}, nil
}

// rss is the resident memory of process pid, in bytes (VmRSS).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("the server's memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("the server's memory: %q", v)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("the server's memory: no VmRSS")
}

// pacedPublisher publishes one message every 1/rate seconds until the time
// given, counting them in sent; it fails when the slowest subscriber is
// more than five seconds of messages behind.
func pacedPublisher(pub publisher, rate float64, sent *int64, minRecv func() int64) func(time.Time) error {
	every := time.Duration(float64(time.Second) / rate)
	behind := int64(5*rate) + 1
	return func(until time.Time) error {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for time.Now().Before(until) {
			<-tick.C
			if lag := *sent - minRecv(); lag > behind {
				return fmt.Errorf("%w: the slowest subscriber is %d messages behind (%d sent)", errFellBehind, lag, *sent)
			}
			if err := pub.publish(context.Background()); err != nil {
				return err
			}
			*sent++
		}
		return nil
	}
}

// errFellBehind is a paced case whose server cannot keep the pace.
var errFellBehind = errors.New("fell behind")

// counts parses a comma list of positive counts for the flag name.
func counts(name, list string) []int {
	var out []int
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("%s: %q is not a positive count", name, s))
		}
		out = append(out, n)
	}
	return out
}

// pidsFlag collects -pid NAME=PID.
type pidsFlag map[string]int

func (f pidsFlag) String() string { return "" }

func (f pidsFlag) Set(v string) error {
	name, p, ok := strings.Cut(v, "=")
	pid, err := strconv.Atoi(p)
	if !ok || name == "" || err != nil || pid < 1 {
		return fmt.Errorf("%q is not NAME=PID", v)
	}
	f[name] = pid
	return nil
}
