package seat

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/skytale-oss/skytale/cover"
)

// TestCoverTrafficShape runs the cover scheduler on a connection that also
// sends real batches, as a long-lived sync connection does, and checks the
// relay's view: every frame, cover or real, is the same magic followed by
// bytes whose length is one of the real frames' lengths, and the key holder
// drops exactly the cover frames.
func TestCoverTrafficShape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := testKey(t)
		type frame struct {
			data  []byte
			cover bool
		}
		var (
			mu   sync.Mutex // serializes writes to the wire, as a connection's write lock does
			wire []frame
		)
		sched := cover.New(cover.Config{MeanInterval: time.Second, Rand: rand.NewPCG(1, 1)},
			func(ctx context.Context, size int) error {
				b, err := k.SealCover(testChannel, size)
				if err != nil {
					return err
				}
				mu.Lock()
				wire = append(wire, frame{b, true})
				mu.Unlock()
				return nil
			})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- sched.Run(ctx) }()

		realLens := map[int]bool{}
		for i := range 200 {
			// Real pushes of varying size, every 3 s.
			b, err := k.Seal(testChannel, testEntries(1+i%40))
			if err != nil {
				t.Fatal(err)
			}
			sched.Observe(len(b) - Overhead)
			realLens[len(b)] = true
			mu.Lock()
			wire = append(wire, frame{b, false})
			mu.Unlock()
			time.Sleep(3 * time.Second)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		covers := 0
		for _, f := range wire {
			if !bytes.HasPrefix(f.data, magic[:]) {
				t.Fatal("a frame without the magic")
			}
			if f.cover {
				covers++
				// Before the first real frame the default distribution
				// applies; all later cover lengths are real lengths.
				if !realLens[len(f.data)] && len(f.data) > 2048+Overhead {
					t.Errorf("cover frame of %d bytes, a length no real frame had", len(f.data))
				}
			}
			b, err := k.Open(testChannel, f.data)
			if err != nil || b.Cover != f.cover {
				t.Fatalf("frame opened to cover=%v, %v; sent as cover=%v", b.Cover, err, f.cover)
			}
		}
		if covers < 450 || covers > 750 {
			t.Errorf("%d cover frames in 600 s at 1/s", covers)
		}
	})
}
