package cover

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/skytale-oss/skytale/padding"
)

// recorder collects what a scheduler asked to send, with the fake clock's
// time of each request.
type recorder struct {
	times []time.Time
	sizes []int
}

func (r *recorder) send(ctx context.Context, size int) error {
	r.times = append(r.times, time.Now())
	r.sizes = append(r.sizes, size)
	return nil
}

// runFor runs s for d of fake time inside the current bubble, then cancels it
// and checks that Run returned nil.
func runFor(t *testing.T, s *Scheduler, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(d)
	cancel()
	synctest.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	default:
		t.Fatal("Run did not return after cancel")
	}
}

func TestRateIsExponential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := New(Config{MeanInterval: time.Second, Rand: rand.NewPCG(1, 2)}, r.send)
		start := time.Now()
		runFor(t, s, 10000*time.Second)

		n := len(r.times)
		if n < 9500 || n > 10500 {
			t.Fatalf("%d cover frames in 10000 s at 1/s, want about 10000", n)
		}
		// Exponential intervals have standard deviation equal to their mean;
		// a periodic schedule would have almost none.
		var sum, sq float64
		prev := start
		for _, at := range r.times {
			d := at.Sub(prev).Seconds()
			prev = at
			sum += d
			sq += d * d
		}
		mean := sum / float64(n)
		sd := math.Sqrt(sq/float64(n) - mean*mean)
		if math.Abs(mean-1) > 0.05 || math.Abs(sd-1) > 0.1 {
			t.Errorf("interval mean %.3f s, sd %.3f s; want both about 1 s", mean, sd)
		}
	})
}

func TestDefaultSizes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := New(Config{MeanInterval: time.Second, Rand: rand.NewPCG(3, 4)}, r.send)
		runFor(t, s, 3000*time.Second)
		counts := map[int]int{}
		for _, sz := range r.sizes {
			counts[sz]++
		}
		for sz := range counts {
			if sz != 256 && sz != 512 && sz != 1024 && sz != 2048 {
				t.Errorf("default distribution produced size %d", sz)
			}
		}
		// weights 8:4:2:1
		if c := counts[256]; c < counts[512] || counts[512] < counts[1024] || counts[1024] < counts[2048] || counts[2048] == 0 {
			t.Errorf("default size counts %v, want about 8:4:2:1", counts)
		}
	})
}

func TestSizesFollowRealTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := New(Config{MeanInterval: time.Second, Rand: rand.NewPCG(5, 6)}, r.send)
		for range 300 {
			s.Observe(4096)
		}
		for range 100 {
			s.Observe(padding.Size(40000)) // a Padmé size
		}
		s.Observe(1000) // not a block size: counted as 1024
		runFor(t, s, 4000*time.Second)
		counts := map[int]int{}
		for _, sz := range r.sizes {
			counts[sz]++
		}
		big := padding.Size(40000)
		for sz := range counts {
			if sz != 4096 && sz != big && sz != 1024 {
				t.Errorf("cover size %d was never seen in real traffic", sz)
			}
		}
		ratio := float64(counts[4096]) / float64(counts[big])
		if ratio < 2.5 || ratio > 3.5 {
			t.Errorf("4096:%d ratio %.2f, want about 3 (counts %v)", big, ratio, counts)
		}
	})
}

func TestDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := New(Config{Disabled: true}, r.send)
		runFor(t, s, 24*time.Hour)
		if len(r.times) != 0 {
			t.Errorf("disabled scheduler sent %d frames", len(r.times))
		}
	})
}

func TestZeroConfigIsOnWithDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := New(Config{}, r.send)
		if s.mean != DefaultMeanInterval || s.disabled {
			t.Fatalf("zero Config: mean %v disabled %v", s.mean, s.disabled)
		}
		runFor(t, s, 1000*DefaultMeanInterval)
		if n := len(r.times); n < 850 || n > 1150 {
			t.Errorf("%d frames in 1000 mean intervals with crypto/rand", n)
		}
	})
}

func TestSendErrorStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("connection closed")
		calls := 0
		s := New(Config{Rand: rand.NewPCG(7, 8)}, func(ctx context.Context, size int) error {
			calls++
			return boom
		})
		if err := s.Run(t.Context()); !errors.Is(err, boom) || calls != 1 {
			t.Fatalf("Run = %v after %d calls, want %v after 1", err, calls, boom)
		}
	})
}

func TestCancelDuringSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s := New(Config{Rand: rand.NewPCG(9, 10)}, func(ctx context.Context, size int) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		if err := s.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	})
}

func TestObserveBounded(t *testing.T) {
	s := New(Config{}, nil)
	for i := range 10000 {
		s.Observe(padding.Size(40000 + i*1000))
	}
	for range 2 * maxTotal {
		s.Observe(256)
	}
	if len(s.weights) > maxSizes {
		t.Errorf("%d distinct sizes tracked, cap is %d", len(s.weights), maxSizes)
	}
	sum := 0
	for _, w := range s.weights {
		sum += w.count
	}
	if sum != s.total || s.total >= maxTotal {
		t.Errorf("total %d, sum of counts %d", s.total, sum)
	}
	for range 1000 {
		s.nextSize() // must not hit the internal-error panic
	}
}

func TestHugeMeanDoesNotOverflow(t *testing.T) {
	s := New(Config{MeanInterval: math.MaxInt64, Rand: rand.NewPCG(1, 1)}, nil)
	for range 1000 {
		if d := s.nextInterval(); d < 0 {
			t.Fatalf("interval %v", d)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	s := New(Config{}, nil)
	for _, sz := range padding.Buckets() {
		s.Observe(sz)
	}
	for b.Loop() {
		s.nextInterval()
		s.nextSize()
	}
}

// BenchmarkDefaultBandwidth reports the padded bytes per second the default
// configuration asks for, on a connection with no real traffic yet, by
// drawing a simulated day of intervals and sizes (the wire adds each frame's
// encryption and framing overhead on top).
func BenchmarkDefaultBandwidth(b *testing.B) {
	var bytes, secs float64
	for b.Loop() {
		s := New(Config{}, nil)
		bytes, secs = 0, 0
		for secs < 24*3600 {
			secs += s.nextInterval().Seconds()
			bytes += float64(s.nextSize())
		}
	}
	b.ReportMetric(bytes/secs, "B/s")
	b.ReportMetric(bytes/secs*86400/(1<<20), "MiB/day")
}

// TestLifetimes: connection lifetimes are off unless a mean is set, follow
// the capped exponential with that mean, never pass four means, and a
// frame's place within one is uniform.
func TestLifetimes(t *testing.T) {
	if d := (Config{}).Lifetime(); d != 0 {
		t.Fatalf("no MeanLifetime drew %v", d)
	}
	if d := (Config{MeanLifetime: time.Second, Disabled: true}).Lifetime(); d != 0 {
		t.Fatalf("disabled cover drew %v", d)
	}
	cfg := Config{MeanLifetime: time.Second, Rand: rand.NewPCG(3, 4)}
	const n = 20000
	var sum, within float64
	for range n {
		d := cfg.Lifetime()
		if d < 0 || d > maxLifetimeMeans*time.Second {
			t.Fatalf("lifetime %v outside [0, 4 s]", d)
		}
		sum += d.Seconds()
		w := cfg.Within(time.Second)
		if w < 0 || w >= time.Second {
			t.Fatalf("Within(1 s) = %v", w)
		}
		within += w.Seconds()
	}
	// The mean of an exponential of mean 1 capped at 4 is 1-e^-4.
	if want := 1 - math.Exp(-4); math.Abs(sum/n-want) > 0.03 {
		t.Errorf("mean lifetime %.3f s, want about %.3f s", sum/n, want)
	}
	if math.Abs(within/n-0.5) > 0.02 {
		t.Errorf("mean place within 1 s is %.3f s, want about 0.5 s", within/n)
	}
}
