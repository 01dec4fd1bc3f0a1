package jsarchive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// pageReader is a page read's consumer: a short-lived one on the stream,
// filtered to the channel's subjects, from a start sequence. When a try
// meets a leader change or a lost server, the read opens a new consumer
// from the entry after the last one it got and goes on, until its budget
// (jsBudget, or the request's deadline if sooner) is spent.
type pageReader struct {
	a        *archive
	ctx      context.Context
	filter   string
	start    time.Time
	cons     jetstream.Consumer
	cname    string
	next     uint64 // the stream seq the page goes on from
	pending  uint64
	attempts int
}

// open (re)creates the consumer from r.next, trying again until the
// budget is spent.
func (r *pageReader) open() error {
	r.drop()
	wait := 50 * time.Millisecond
	for {
		var id [8]byte
		rand.Read(id[:])
		cname := "read-" + hex.EncodeToString(id[:])
		cctx, cancel := context.WithTimeout(r.ctx, jsTry)
		cons, err := r.a.stream.CreateConsumer(cctx, jetstream.ConsumerConfig{
			Name:              cname,
			FilterSubject:     r.filter,
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       r.next,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			Replicas:          1,
			InactiveThreshold: time.Minute,
		})
		cancel()
		if err == nil {
			r.cons, r.cname, r.pending = cons, cname, cons.CachedInfo().NumPending
			return nil
		}
		if err := r.retry(err, &wait); err != nil {
			return err
		}
	}
}

// retry waits before the next try of a failed one, or returns the error
// to end the read with when no try is left.
func (r *pageReader) retry(err error, wait *time.Duration) error {
	r.attempts++
	if !retryable(err) || r.ctx.Err() != nil || time.Since(r.start)+*wait > jsBudget {
		return fmt.Errorf("%w: archive read: %w", backend.ErrUnavailable, err)
	}
	if dl, ok := r.ctx.Deadline(); ok && time.Until(dl) < *wait+jsTry {
		return fmt.Errorf("%w: archive read: %w", backend.ErrUnavailable, err)
	}
	time.Sleep(*wait)
	*wait = min(2**wait, jsMaxWait)
	return nil
}

// drop deletes the consumer, if any (a consumer on a lost server goes by
// its InactiveThreshold).
func (r *pageReader) drop() {
	if r.cons == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.Background(), jsTry)
	r.a.stream.DeleteConsumer(dctx, r.cname)
	cancel()
	r.cons = nil
}

// WritePage serves a page from JetStream through a short-lived consumer
// on the stream, filtered to the channel's subjects from since+1; it
// fetches in rounds of at most the page's bytes, so a read holds about
// one page, never the whole channel. A leader change or a lost server
// during the read costs a new consumer from where the page got to (see
// pageReader); a read that cannot start within its budget is
// backend.ErrUnavailable, and one that cannot finish is aborted (the
// client sees a broken body, never a page that looks whole).
func (a *archive) WritePage(ctx context.Context, w io.Writer, begin func(), name string, since uint64, limit, maxBytes int, appOnly bool) (started bool, err error) {
	filter := a.name + ".*." + token(name)
	if appOnly {
		filter = a.appSubject(name)
	}
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	a.mu.Lock()
	hw := a.hw
	a.mu.Unlock()
	r := &pageReader{a: a, ctx: ctx, filter: filter, start: time.Now(), next: since + 1}
	defer r.drop()
	if since+1 != 0 { // past the last possible seq nothing follows
		if err := r.open(); err != nil {
			return false, err
		}
	}
	begin()
	pe := backend.NewPageEncoder(w, maxBytes, appOnly)
	defer pe.Release()
	n, empty := 0, 0
	wait := 50 * time.Millisecond
	// failed ends a try: the read goes on from r.next on a new consumer,
	// or ends with the error.
	failed := func(err error) error {
		if err := r.retry(err, &wait); err != nil {
			return err
		}
		return r.open()
	}
	for r.pending > 0 && !pe.More {
		batch := min(r.pending, uint64(limit+1-n))
		msgs, err := r.cons.Fetch(int(batch), jetstream.FetchMaxBytes(max(maxBytes, 2*a.maxPayload, a.maxHandshake+HeaderRoom)), jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			if err := failed(err); err != nil {
				return true, err
			}
			continue
		}
		got := uint64(0)
		for m := range msgs.Messages() {
			got++
			if pe.More {
				continue // drain the batch
			}
			md, err := m.Metadata()
			if err != nil {
				return true, fmt.Errorf("relay: archive read: %w", err)
			}
			if md.Sequence.Stream < r.next {
				continue // a retry's consumer starts no earlier than this
			}
			r.next = md.Sequence.Stream + 1
			h := m.Headers()
			ts, _ := strconv.ParseInt(h.Get(hdrTS), 10, 64)
			typ := h.Get(hdrType)
			if typ == fenceMarker {
				continue
			}
			if ts < cutoff {
				pe.Truncated = true // past the TTL, not yet removed
				continue
			}
			if n == limit {
				pe.More = true
				continue
			}
			var et uint8
			if typ != "" {
				x, _ := strconv.ParseUint(typ, 10, 8)
				et = uint8(x)
			}
			fits, err := pe.Add(md.Sequence.Stream, et, ts, m.Data())
			if err != nil {
				return true, err
			}
			if fits {
				n++
			} else {
				r.next = md.Sequence.Stream // not in this page
			}
		}
		if err := msgs.Error(); err != nil && !pe.More {
			if err := failed(err); err != nil {
				return true, err
			}
			continue
		}
		if got == 0 {
			// What was pending went meanwhile (the cap, MaxAge or the
			// sweep deleted it), or JetStream is slow: ask what is left.
			if empty++; empty > 3 {
				return true, errors.New("relay: archive read: JetStream sends nothing of a pending page")
			}
			ictx, cancel := context.WithTimeout(ctx, jsTry)
			info, err := r.cons.Info(ictx)
			cancel()
			if err != nil {
				if err := failed(err); err != nil {
					return true, err
				}
				continue
			}
			r.pending = info.NumPending
			continue
		}
		empty = 0
		r.pending -= min(got, r.pending)
	}
	// After the page: the mirror has then seen at least what the stream
	// pushed out before the page was read, so a loss under it is told.
	trunc, oldest := a.floorsOf(name, since, pe.First, hw, cutoff, appOnly)
	pe.Truncated = pe.Truncated || trunc
	pe.Oldest = oldest
	return true, pe.Finish()
}
