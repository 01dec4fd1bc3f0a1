// Command relaybench drives a running relay (tally serve, or any relay with
// its directory) over real sockets from a separate process, with the
// closed-loop method of docs/BENCHMARKS-NOTES.md:
//
//   - fan-out: one publisher, N subscribers on one channel, 1 KiB
//     payloads, at most K messages outstanding per subscriber (published
//     and not yet received by it); reports delivered/s, the publish →
//     delivery latency under that load and the frames per WebSocket
//     message seen on the wire (batches);
//   - latency: one publisher, one subscriber, one message in flight;
//   - durable: C connections, each on its own channel with F publishes in
//     flight, counting acks (an ack means the entry is durable).
//
// Rounds interleave the scenarios, so a change in the machine's load hits
// them alike; the summary gives the median of the rounds.
//
//	go -C bench run ./relaybench -data ~/.local/share/skytale
//
// With -data (the serve's data folder) it creates accounts with the
// operator's internal secret and mints tokens with the JWT secret;
// without, it signs up through the directory's open signup (on for a
// loopback serve; 20 signups per 3 minutes from one address) and mints
// tokens through POST /v1/tokens.
//
// # Other servers, side by side
//
// The same scenarios, clock and histograms drive other servers, so that
// one run with one client compares them:
//
//   - nats: nats-server; fan-out and latency with core NATS publish and
//     subscribe on one subject (nothing kept), durable with JetStream, one
//     file-storage stream per durable channel (capped at 1,000 messages
//     like the relay's archive): F asynchronous publishes in flight per
//     connection, or the synchronous publish when F is 1. NATS carries
//     the raw payload bytes; the WebSocket servers carry them as base64.
//   - centrifugo: Centrifugo's bidirectional JSON protocol over WebSocket,
//     connected with an HS256 token signed with the configuration's
//     client.token.hmac_secret_key; the channel needs
//     allow_subscribe_for_client and allow_publish_for_client. It has no
//     durable case (the memory engine keeps nothing).
//
// -target takes one server or a list; a list interleaves the servers
// scenario for scenario within each round, and each round starts with
// the next server in the list:
//
//	go -C bench run ./relaybench -target skytale,nats,centrifugo \
//		-api http://127.0.0.1:3190 -relay http://127.0.0.1:8490 -data D \
//		-nats nats://127.0.0.1:4290 \
//		-centrifugo http://127.0.0.1:8590 -centrifugo-config centrifugo.json
//
// sidebyside.sh in this folder starts the three servers, runs that and
// stops them.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	api, relay, data string
	subs             []int
	outstanding      int
	size             int
	rounds           int
	round            time.Duration
	batch            bool
	durable          []durableCase
	latency          bool

	targets          []string                // servers to drive, in the order of the first round; empty is skytale
	others           map[string]skytaleRelay // more skytale relays, by their name in targets
	nats             string                  // the nats-server's URL
	centrifugo       string                  // Centrifugo's URL
	centrifugoSecret []byte                  // its client.token.hmac_secret_key
	clientCPU        bool                    // report this process's CPU per measurement
	fsyncDir         string                  // probe the flush of this folder's disk each round; "" for none
	metrics          string                  // the skytale serve's metrics URL, to count its archive's flushes
	idle             []int                   // idle subscribed connections to hold, per case
	active           []int                   // subscribers of the paced case, per case
	rate             float64                 // messages a second in the paced case
	pids             map[string]int          // each target's server process, for its memory
	baseRSS          map[string]int64        // each one's resident memory before the first case
}

type durableCase struct{ conns, inflight int }

// skytaleRelay is where another skytale relay is, for comparing two
// builds in one run.
type skytaleRelay struct{ api, relay, data string }

// othersFlag collects -skytale NAME,API,RELAY[,DATA].
type othersFlag map[string]skytaleRelay

func (f othersFlag) String() string { return "" }

func (f othersFlag) Set(v string) error {
	p := strings.Split(v, ",")
	if len(p) < 3 || len(p) > 4 || p[0] == "" || p[1] == "" || p[2] == "" {
		return errors.New("want NAME,API,RELAY or NAME,API,RELAY,DATA")
	}
	if slices.Contains(targetNames, p[0]) {
		return fmt.Errorf("%s is a target's name", p[0])
	}
	if _, ok := f[p[0]]; ok {
		return fmt.Errorf("%s twice", p[0])
	}
	r := skytaleRelay{api: p[1], relay: p[2]}
	if len(p) == 4 {
		r.data = p[3]
	}
	f[p[0]] = r
	return nil
}

func main() {
	var o options
	var subs, durable, targets, cfConfig string
	flag.StringVar(&o.api, "api", "http://127.0.0.1:3100", "the directory's URL")
	flag.StringVar(&o.relay, "relay", "http://127.0.0.1:8443", "the relay's URL")
	flag.StringVar(&o.data, "data", "", "the serve's data folder: create accounts with its internal secret and mint tokens with its JWT secret")
	flag.StringVar(&subs, "subs", "1,100,1000", "fan-out subscriber counts")
	flag.IntVar(&o.outstanding, "outstanding", 256, "messages outstanding per subscriber in fan-out")
	flag.IntVar(&o.size, "size", 1024, "payload bytes")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&o.round, "duration", 10*time.Second, "length of each measurement")
	flag.BoolVar(&o.batch, "batch", true, "ask the relay for coalesced pushes")
	flag.StringVar(&durable, "durable", "16x64,1x1", "durable publish cases, connections x in flight (empty for none)")
	flag.BoolVar(&o.latency, "latency", true, "run the one-in-flight latency case")
	flag.StringVar(&targets, "target", "skytale", "the servers to drive: skytale, nats or centrifugo (or a name given with -skytale), or a comma list of them to interleave")
	o.others = othersFlag{}
	flag.Var(othersFlag(o.others), "skytale", "another skytale relay as a target, `NAME,API,RELAY[,DATA]` (repeatable): compares two builds in one run")
	flag.StringVar(&o.nats, "nats", "nats://127.0.0.1:4222", "the nats-server's URL (JetStream on, for the durable cases)")
	flag.StringVar(&o.centrifugo, "centrifugo", "http://127.0.0.1:8000", "Centrifugo's URL (its WebSocket is /connection/websocket)")
	flag.StringVar(&cfConfig, "centrifugo-config", "", "Centrifugo's JSON configuration file, for its client.token.hmac_secret_key")
	flag.StringVar(&o.fsyncDir, "fsync", "", "a folder on the serve's disk (its data folder): each round also measures 4 KiB appends each followed by fdatasync there, the flush a durable ack waits for")
	flag.StringVar(&o.metrics, "metrics", "", "the skytale serve's metrics URL (tally serve --metrics-addr, then http://ADDR/metrics): the durable cases report the acks per flush of its archive")
	var idle, active string
	flag.StringVar(&idle, "idle", "", "idle subscribed connection counts: each target's server memory per connection (needs -pid)")
	flag.StringVar(&active, "active", "", "subscriber counts of the paced case: one publisher at -rate, the delivery latency")
	flag.Float64Var(&o.rate, "rate", 10, "messages a second in the paced case (-active)")
	o.pids = pidsFlag{}
	flag.Var(pidsFlag(o.pids), "pid", "a target's server process, `NAME=PID` (repeatable), for -idle")
	flag.Parse()
	o.subs = counts("-subs", subs)
	o.idle, o.active = counts("-idle", idle), counts("-active", active)
	if o.rate <= 0 {
		fatal(errors.New("-rate must be above 0"))
	}
	for _, s := range strings.Split(durable, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		var d durableCase
		if _, err := fmt.Sscanf(s, "%dx%d", &d.conns, &d.inflight); err != nil || d.conns < 1 || d.inflight < 1 || d.conns > 60 {
			fatal(fmt.Errorf("-durable: %q is not CONNSxINFLIGHT (connections 1 to 60)", s))
		}
		o.durable = append(o.durable, d)
	}
	if o.size < 16 || o.size > 1<<20 {
		fatal(errors.New("-size must be 16 to 1048576"))
	}
	for _, s := range strings.Split(targets, ",") {
		s = strings.TrimSpace(s)
		if _, ok := o.others[s]; !ok && !slices.Contains(targetNames, s) {
			fatal(fmt.Errorf("-target: %q is not one of %s, nor a name given with -skytale", s, strings.Join(targetNames, ", ")))
		}
		if slices.Contains(o.targets, s) {
			fatal(fmt.Errorf("-target: %s twice", s))
		}
		o.targets = append(o.targets, s)
	}
	if slices.Contains(o.targets, "centrifugo") {
		if cfConfig == "" {
			fatal(errors.New("-target centrifugo needs -centrifugo-config"))
		}
		secret, err := centrifugoSecret(cfConfig)
		if err != nil {
			fatal(fmt.Errorf("-centrifugo-config: %w", err))
		}
		o.centrifugoSecret = secret
	}
	if err := run(o); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "relaybench:", err)
	os.Exit(1)
}

// centrifugoSecret reads client.token.hmac_secret_key from a Centrifugo
// JSON configuration file.
func centrifugoSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c struct {
		Client struct {
			Token struct {
				HMACSecretKey string `json:"hmac_secret_key"`
			} `json:"token"`
		} `json:"client"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.Client.Token.HMACSecretKey == "" {
		return nil, errors.New("no client.token.hmac_secret_key")
	}
	return []byte(c.Client.Token.HMACSecretKey), nil
}

// start is the clock payloads carry: nanoseconds since the process began,
// monotonic.
var start = time.Now()

func now() int64 { return int64(time.Since(start)) }

// A target is one server the scenarios drive, through its own client
// protocol.
type target interface {
	// String describes the server for the run's header.
	String() string
	// subscribers opens n subscribers on the fan-out channel, each
	// subscribed when it returns.
	subscribers(ctx context.Context, n int) ([]subscriber, error)
	// publisher opens a publisher on the fan-out channel, one that does
	// not receive its own messages.
	publisher(ctx context.Context) (publisher, error)
	// durables opens conns publishers, each on its own durable channel,
	// for inflight publishes in flight each; errNoDurable when the server
	// keeps nothing.
	durables(ctx context.Context, conns, inflight int) ([]durablePublisher, error)
	// wireMessages reports whether a subscriber's receive is one message
	// of the wire, which may carry several publications.
	wireMessages() bool
	close()
}

type subscriber interface {
	// receive waits for the next message and returns how many
	// publications it carries; with h, it adds each one's latency to h.
	receive(ctx context.Context, h *hist) (int, error)
	close()
}

// openAll opens n connections with open, 16 at a time. If any fails it
// closes the others and returns the first error.
func openAll[C interface{ close() }](n int, open func(i int) (C, error)) ([]C, error) {
	conns := make([]C, n)
	ok := make([]bool, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := open(i)
			if err != nil {
				errs <- err
				return
			}
			conns[i], ok[i] = c, true
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for i, c := range conns {
			if ok[i] {
				c.close()
			}
		}
		return nil, err
	}
	return conns, nil
}

// countPushes counts the pushes in msg, a WebSocket message that may
// carry several separated by newlines: the lines that start with push.
// With h it adds each push's latency, read from the send time at the
// start of the payload after key, to h. Other lines go to other, if set.
func countPushes(msg, push, key []byte, h *hist, other func(line []byte)) int {
	frames := 0
	for len(msg) > 0 {
		line := msg
		if j := bytes.IndexByte(msg, '\n'); j >= 0 {
			line, msg = msg[:j], msg[j+1:]
		} else {
			msg = nil
		}
		if !bytes.HasPrefix(line, push) {
			if other != nil {
				other(line)
			}
			continue
		}
		frames++
		if h != nil {
			if ts, ok := stampOf(line, key); ok {
				h.add(now() - ts)
			}
		}
	}
	return frames
}

type publisher interface {
	// publish sends one payload that starts with the send time.
	publish(ctx context.Context) error
	close()
}

type durablePublisher interface {
	// publish sends one payload; it returns before the ack (or, for a
	// publish that waits for its ack, makes acked return it).
	publish(ctx context.Context) error
	// acked waits for the next acks, which come in publish order, and
	// returns how many.
	acked(ctx context.Context) (int, error)
	// close ends the connection and unblocks acked.
	close()
}

var errNoDurable = errors.New("no durable case")

var targetNames = []string{"skytale", "nats", "centrifugo"}

// bench is one target with its name in the output.
type bench struct {
	name string
	t    target
	// scrape reads the target's flushes and acks, for the durable
	// cases; nil for none.
	scrape *scraper
}

func run(o options) error {
	ctx := context.Background()
	maxSubs := slices.Max(slices.Concat(o.subs, o.idle, o.active, []int{1}))
	names := o.targets
	if len(names) == 0 {
		names = []string{"skytale"}
	}
	benches, err := openBenches(ctx, o, names, maxSubs)
	defer func() {
		for _, b := range benches {
			b.t.close()
		}
	}()
	if err != nil {
		return err
	}
	alone := len(benches) == 1
	// Side by side, the client's own CPU shows when it, and not the
	// server, may be what bounds a figure.
	o.clientCPU = !alone
	printHeader(o, names[0], benches)
	results := map[string][]result{}
	var order []string
	add := func(b bench, scenario string, r result) {
		name := scenario
		if !alone {
			name = b.name + " " + scenario
		}
		if _, ok := results[name]; !ok {
			order = append(order, name)
		}
		results[name] = append(results[name], r)
		if alone {
			fmt.Printf("round %d  %-22s %s\n", len(results[name]), name, r)
		} else {
			fmt.Printf("round %d  %-10s %-24s %s\n", len(results[name]), b.name, scenario, r)
		}
	}
	if len(o.idle) > 0 {
		if o.baseRSS, err = baseMemory(o, benches); err != nil {
			return err
		}
	}
	skipped := map[string]error{} // by target: why it has no durable case
	var disk []result
	for round := range o.rounds {
		if o.fsyncDir != "" {
			r, err := diskProbe(ctx, o.fsyncDir, min(o.round, 5*time.Second))
			if err != nil {
				return fmt.Errorf("disk probe: %w", err)
			}
			disk = append(disk, r)
			fmt.Printf("round %d  %-*s %s\n", round+1, map[bool]int{true: 22, false: 35}[alone], "disk 4 KiB + fdatasync", r)
		}
		// Each round starts with the next server, so none always runs
		// first after the machine was quiet.
		turn := slices.Concat(benches[round%len(benches):], benches[:round%len(benches)])
		// The scale cases first: the idle one reads the servers' memory,
		// which the cases before it would have grown.
		if err := scale(ctx, o, turn, add); err != nil {
			return err
		}
		for _, n := range o.subs {
			for _, b := range turn {
				r, err := fanout(ctx, b.t, o, n, o.outstanding, 0)
				if err != nil {
					return fmt.Errorf("%s: fan-out 1→%d: %w", b.name, n, err)
				}
				add(b, fmt.Sprintf("fan-out 1→%d", n), r)
			}
		}
		if o.latency {
			for _, b := range turn {
				r, err := fanout(ctx, b.t, o, 1, 1, 0)
				if err != nil {
					return fmt.Errorf("%s: latency: %w", b.name, err)
				}
				add(b, "latency 1→1, 1 in flight", r)
			}
		}
		for _, d := range o.durable {
			for _, b := range turn {
				r, err := durable(ctx, b, o, d)
				if errors.Is(err, errNoDurable) {
					if skipped[b.name] == nil {
						fmt.Printf("round %d  %-10s %v\n", round+1, b.name, err)
					}
					skipped[b.name] = err
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: durable %dx%d: %w", b.name, d.conns, d.inflight, err)
				}
				add(b, fmt.Sprintf("durable %d conn × %d", d.conns, d.inflight), r)
			}
		}
	}
	fmt.Printf("\nmedian of %d rounds\n", o.rounds)
	width := 26
	if !alone {
		width = 37
	}
	for _, name := range order {
		fmt.Printf("%-*s %s\n", width, name, median(results[name]))
	}
	for _, b := range benches {
		if err := skipped[b.name]; err != nil {
			fmt.Printf("%-*s %v\n", width, b.name+" durable", err)
		}
	}
	if len(disk) > 0 {
		fmt.Printf("%-*s %s\n", width, "disk 4 KiB + fdatasync", median(disk))
		diskSummary(results, median(disk), o.durable, alone)
	}
	if alone || !slices.Contains(names, "skytale") {
		return nil
	}
	// The ratios of the medians, skytale's over each other server's.
	for _, b := range benches {
		if b.name == "skytale" {
			continue
		}
		fmt.Printf("\nskytale / %s (medians): rate, p50, p99\n", b.name)
		for _, name := range order {
			scenario, ok := strings.CutPrefix(name, "skytale ")
			if !ok {
				continue
			}
			other, ok := results[b.name+" "+scenario]
			if !ok {
				continue
			}
			s, x := median(results[name]), median(other)
			fmt.Printf("%-26s %6.2f×  %6.2f×  %6.2f×\n", scenario, s.rate/x.rate, ratio(s.p50, x.p50), ratio(s.p99, x.p99))
		}
	}
	return nil
}

// openBenches sets up each target named, with its scraper; on an error it
// returns those it set up, for the caller to close.
func openBenches(ctx context.Context, o options, names []string, maxSubs int) ([]bench, error) {
	maxConns := 0
	for _, d := range o.durable {
		maxConns = max(maxConns, d.conns)
	}
	var benches []bench
	for _, name := range names {
		var t target
		var err error
		switch name {
		case "skytale":
			t, err = setup(ctx, o, maxSubs)
		case "nats":
			t, err = newNATS(ctx, o, maxConns)
		case "centrifugo":
			t, err = newCentrifugo(o)
		default:
			r, ok := o.others[name]
			if !ok {
				err = fmt.Errorf("unknown target %q", name)
				break
			}
			oo := o
			oo.api, oo.relay, oo.data = r.api, r.relay, r.data
			t, err = setup(ctx, oo, maxSubs)
		}
		if err != nil {
			return benches, fmt.Errorf("%s: %w", name, err)
		}
		b := bench{name: name, t: t}
		if name == "skytale" && o.metrics != "" {
			b.scrape = &scraper{url: o.metrics, http: &http.Client{Timeout: 10 * time.Second}}
		}
		benches = append(benches, b)
	}
	return benches, nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// durable runs d.conns publishers, each on its own channel with
// d.inflight publishes in flight, and counts the acks.
func durable(ctx context.Context, b bench, o options, d durableCase) (result, error) {
	pubs, err := b.t.durables(ctx, d.conns, d.inflight)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, p := range pubs {
			p.close()
		}
	}()
	var measuring atomic.Bool
	var acks atomic.Int64
	hists := make([]*hist, d.conns)
	// Each ack reader adds to its hist until its connection closes,
	// which is after the merge: the lock keeps the two apart.
	mus := make([]sync.Mutex, d.conns)
	errs := make(chan error, d.conns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range pubs {
		hists[i] = new(hist)
		wg.Go(func() {
			// A slot is taken before each publish and given back by its
			// ack. The send time is read once the slot is had: a time
			// taken as the select begins would count the wait for the
			// previous ack too.
			slots := make(chan struct{}, d.inflight)
			sent := make(chan int64, d.inflight) // send times, in order
			done := make(chan error, 1)
			go func() {
				for {
					n, err := p.acked(ctx)
					for range n {
						t := <-sent
						<-slots
						if measuring.Load() {
							mus[i].Lock()
							hists[i].add(now() - t)
							mus[i].Unlock()
							acks.Add(1)
						}
					}
					if err != nil {
						done <- err
						return
					}
				}
			}()
			for {
				select {
				case <-stop:
					errs <- nil
					return
				case err := <-done:
					errs <- err
					return
				case slots <- struct{}{}:
				}
				sent <- now()
				if err := p.publish(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(time.Second)
	var commits0, acked0 float64
	if b.scrape != nil {
		if commits0, acked0, err = b.scrape.read(ctx); err != nil {
			return result{}, err
		}
	}
	measuring.Store(true)
	cpu0 := cpuTime()
	t0 := time.Now()
	time.Sleep(o.round)
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu := cpuTime() - cpu0
	var perFlush float64
	if b.scrape != nil {
		commits, acked, err := b.scrape.read(ctx)
		if err != nil {
			return result{}, err
		}
		if commits > commits0 {
			perFlush = (acked - acked0) / (commits - commits0)
		}
	}
	n := acks.Load()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	var h hist
	for i, x := range hists {
		mus[i].Lock()
		h.merge(x)
		mus[i].Unlock()
	}
	r := result{rate: float64(n) / elapsed.Seconds(), unit: "acks/s", perFlush: perFlush,
		p50: time.Duration(h.quantile(0.5)), p99: time.Duration(h.quantile(0.99)), p999: time.Duration(h.quantile(0.999))}
	if o.clientCPU {
		r.clientCPU = cpu.Seconds() / elapsed.Seconds()
	}
	return r, nil
}

// printHeader says what the run drives and how.
func printHeader(o options, first string, benches []bench) {
	if len(benches) == 1 && first == "skytale" {
		fmt.Printf("relay %s, directory %s, payload %d B, %d outstanding per subscriber, %d rounds of %s, batch %v\n\n",
			o.relay, o.api, o.size, o.outstanding, o.rounds, o.round, o.batch)
		return
	}
	for _, b := range benches {
		fmt.Printf("%-10s %s\n", b.name, b.t)
	}
	fmt.Printf("payload %d B, %d outstanding per subscriber, %d rounds of %s\n\n", o.size, o.outstanding, o.rounds, o.round)
}
