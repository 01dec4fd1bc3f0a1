// Package cover schedules cover traffic on long-lived connections.
//
// Padding (package padding) quantizes the size of each frame, but an observer
// of a connection still sees when frames are sent. While a connection is open,
// a [Scheduler] asks its caller for extra frames at random times, so that
// silence and activity look alike on the wire.
//
// # What the caller does
//
// The scheduler only decides when, and how large. At each tick of [Scheduler.Run]
// it calls the send function with a padded block size; the caller must then
// produce a real encryption of a cover marker of that size, with the same
// framing as a real message, so the relay cannot tell the two apart, and
// receivers drop it after decrypting. The caller reports the padded size of
// every real frame it sends with [Scheduler.Observe]; cover sizes are drawn
// from the distribution of those sizes, so cover looks like the connection's
// own traffic. Before any real frame is seen, sizes are drawn from a fixed
// default distribution: 256, 512, 1024 and 2048 bytes in the ratio 8:4:2:1.
//
// # Timing
//
// Intervals between cover frames are independent and exponentially
// distributed (a Poisson process) with a configurable mean. Unlike a fixed
// period, this leaves no phase for an observer to lock onto, and a real frame
// sent at any moment is as likely as a cover frame to have been sent then.
// Cover is on by default and can be turned off with [Config.Disabled].
//
// # Connection lifetimes
//
// Cover on a long-lived connection does not hide a frame sent on a short
// connection of its own: the connection gives it away. With
// [Config.MeanLifetime] set, [Config.Lifetime] draws how long a connection
// lasts (exponential, capped at four means): a long-lived connection is
// opened again after each, and a one-shot frame is sent on a connection of
// a drawn lifetime, among cover, at a moment drawn by [Config.Within].
//
// # Cost
//
// At the default rate and size distribution a connection carries about
// 9 padded bytes per second of cover (one frame of 546 bytes on average every
// 60 s, about 0.75 MiB a day), plus each frame's encryption and framing
// overhead; BenchmarkDefaultBandwidth measures it. The relay keeps cover as
// it keeps messages (it cannot tell them apart), so the rate is also what
// cover costs a room's bounded log: at one frame a minute per watcher, five
// members watching a room all day send 7,200 frames, which the relay's
// default of 10,000 entries per channel holds with room for a day's real
// messages.
package cover

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"math"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/padding"
)

// DefaultMeanInterval is the mean time between cover frames when
// [Config.MeanInterval] is zero.
const DefaultMeanInterval = 60 * time.Second

// maxSizes bounds how many distinct block sizes the scheduler tracks, so that
// a stream of unusual large sizes cannot grow its memory without bound.
const maxSizes = 64

// maxTotal is the observation count at which all counts are halved, so old
// traffic slowly gives way to recent traffic and counters cannot overflow.
const maxTotal = 1 << 16

// defaultWeights is the size distribution used before any real frame has been
// observed: mostly small frames, as short messages and small sync batches are
// the common case.
var defaultWeights = []weight{{256, 8}, {512, 4}, {1024, 2}, {2048, 1}}

type weight struct{ size, count int }

// Config configures a [Scheduler]. The zero value means the documented
// defaults: cover on, one frame every [DefaultMeanInterval] on average,
// randomness from crypto/rand.
type Config struct {
	// MeanInterval is the mean time between cover frames. Zero (or
	// negative) means DefaultMeanInterval. A larger value costs less bandwidth and masks
	// less.
	MeanInterval time.Duration

	// Disabled turns cover traffic off; Run then only waits for its context.
	Disabled bool

	// MeanLifetime, when positive, is the mean lifetime of a connection
	// that carries cover: a long-lived connection is closed and opened
	// again after a lifetime drawn by [Config.Lifetime], and a one-shot
	// send is made on a connection of such a lifetime, among cover, so
	// that neither is told from the other by how long it lasts. Zero
	// means connections last as long as their user wants (a one-shot
	// send is then seen apart by its short connection).
	MeanLifetime time.Duration

	// Rand is the source of intervals and sizes. Nil means crypto/rand.
	// A predictable source lets an observer who knows it separate cover
	// from real frames; inject one only in tests.
	Rand mrand.Source
}

// maxLifetimeMeans caps a drawn connection lifetime at this many means, so
// that a one-shot send, which waits for its connection's lifetime, returns
// within a known time.
const maxLifetimeMeans = 4

// Lifetime draws the lifetime of one connection: exponentially distributed
// with mean cfg.MeanLifetime, capped at four means. It returns zero when
// cfg.MeanLifetime is not positive or cover is disabled.
func (cfg Config) Lifetime() time.Duration {
	if cfg.Disabled || cfg.MeanLifetime <= 0 {
		return 0
	}
	x := min(cfg.rand().ExpFloat64(), maxLifetimeMeans)
	return time.Duration(x * float64(cfg.MeanLifetime))
}

// Within draws a time uniformly in [0, d): where a real frame goes in a
// connection of lifetime d, as a cover frame of a Poisson process would
// be, given that it falls in the connection.
func (cfg Config) Within(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(cfg.rand().Int64N(int64(d)))
}

func (cfg Config) rand() *mrand.Rand {
	if cfg.Rand != nil {
		return mrand.New(cfg.Rand)
	}
	return mrand.New(cryptoSource{})
}

// A Scheduler emits cover frames for one connection. Create it with [New];
// its methods are safe for concurrent use.
type Scheduler struct {
	mean     time.Duration
	disabled bool
	send     func(ctx context.Context, size int) error

	mu      sync.Mutex // guards the following fields
	rnd     *mrand.Rand
	weights []weight // observed real sizes, sorted by size
	total   int
}

// New returns a scheduler that calls send with a padded block size each time
// a cover frame is due. send runs on the goroutine that called
// [Scheduler.Run], with Run's context.
func New(cfg Config, send func(ctx context.Context, size int) error) *Scheduler {
	src := cfg.Rand
	if src == nil {
		src = cryptoSource{}
	}
	mean := cfg.MeanInterval
	if mean <= 0 {
		mean = DefaultMeanInterval
	}
	return &Scheduler{
		mean:     mean,
		disabled: cfg.Disabled,
		send:     send,
		rnd:      mrand.New(src),
	}
}

// Observe records the padded block size of a real frame sent on the
// connection. A size that is not a valid block size is rounded up to the one
// padding would give it.
func (s *Scheduler) Observe(size int) {
	if !padding.Valid(size) {
		n := max(size-padding.HeaderLen, 0)
		n = min(n, padding.MaxPayload)
		size = padding.Size(n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.weights), func(i int) bool { return s.weights[i].size >= size })
	switch {
	case i < len(s.weights) && s.weights[i].size == size:
		s.weights[i].count++
	case len(s.weights) >= maxSizes:
		return
	default:
		s.weights = append(s.weights, weight{})
		copy(s.weights[i+1:], s.weights[i:])
		s.weights[i] = weight{size, 1}
	}
	s.total++
	if s.total >= maxTotal {
		s.total = 0
		kept := s.weights[:0]
		for _, w := range s.weights {
			if w.count /= 2; w.count > 0 {
				kept = append(kept, w)
				s.total += w.count
			}
		}
		s.weights = kept
	}
}

// Run emits cover frames until ctx is done, then returns nil. If send fails,
// Run stops and returns that error (ctx's error if ctx was done by then). It
// starts no goroutines, and it returns promptly when ctx is done, unless
// send itself is blocked.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.disabled {
		<-ctx.Done()
		return nil
	}
	t := time.NewTimer(s.nextInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.send(ctx, s.nextSize()); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		t.Reset(s.nextInterval())
	}
}

// nextInterval draws an exponentially distributed interval with mean s.mean,
// capped at 50 means (the chance of reaching the cap is e^-50).
func (s *Scheduler) nextInterval() time.Duration {
	s.mu.Lock()
	x := s.rnd.ExpFloat64()
	s.mu.Unlock()
	d := min(x, 50) * float64(s.mean)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// nextSize draws a block size in proportion to the observed sizes, or from
// the default distribution before any observation.
func (s *Scheduler) nextSize() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, total := s.weights, s.total
	if total == 0 {
		ws, total = defaultWeights, 0
		for _, w := range ws {
			total += w.count
		}
	}
	k := s.rnd.IntN(total)
	for _, w := range ws {
		if k < w.count {
			return w.size
		}
		k -= w.count
	}
	panic("cover: internal error: weights do not sum to total")
}

// cryptoSource is a math/rand/v2 Source reading from crypto/rand.
type cryptoSource struct{}

func (cryptoSource) Uint64() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}
