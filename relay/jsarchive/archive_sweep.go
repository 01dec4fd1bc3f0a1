package jsarchive

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// runSweep gives expired entries' bytes back and deletes expired
// handshake messages but the newest of each channel (which JetStream keeps
// past MaxAge, as it holds the fence).
func (a *archive) runSweep() {
	defer close(a.sweepDone)
	t := time.NewTicker(a.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stopSweep:
			return
		case <-t.C:
			a.sweep()
		}
	}
}

func (a *archive) sweep() {
	a.omu.Lock()
	for id, o := range a.origins {
		if time.Since(o.at) > originTTL {
			delete(a.origins, id)
		}
	}
	a.omu.Unlock()
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	var del []uint64
	a.mu.Lock()
	for name, c := range a.chans {
		k := 0
		for k < len(c.app) && c.app[k].ts < cutoff {
			a.creditLocked(c.app[k])
			c.dropped(c.app[k], false)
			k++
		}
		c.app = c.app[k:]
		k = 0
		for k < len(c.hs) && c.hs[k].ts < cutoff {
			a.creditLocked(c.hs[k])
			c.dropped(c.hs[k], true)
			if c.hs[k].seq != c.head.seq {
				del = append(del, c.hs[k].seq)
			}
			k++
		}
		c.hs = c.hs[k:]
		if len(c.app) == 0 && len(c.hs) == 0 && !c.known && c.dropApp == 0 && c.dropHS == 0 {
			delete(a.chans, name)
		}
	}
	a.mu.Unlock()
	for _, seq := range del {
		ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
		err := a.stream.DeleteMsg(ctx, seq)
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			a.log.Error("relay: JetStream sweep failed", "err", err)
			return
		}
	}
}
