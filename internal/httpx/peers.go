package httpx

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
)

// Peers are the base URLs of servers that answer alike (the directories
// of one database, the relays of one cluster). [Peers.Try] asks the one
// that answered last, and the next in turn when that one fails or does
// not answer within its share of the time, so one that died or hangs
// costs a request at most that share.
type Peers struct {
	bases []string
	cur   atomic.Int32 // the index in bases of the peer that answered last
}

// NewPeers parses urls, base URLs separated by commas (trailing slashes
// and blanks dropped). An empty list holds one empty base, which fails on
// use as an empty URL would.
func NewPeers(urls string) *Peers {
	var bases []string
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			bases = append(bases, u)
		}
	}
	if len(bases) == 0 {
		bases = []string{""}
	}
	return &Peers{bases: bases}
}

// Try calls ask with each base in turn, from the one that answered last,
// until one returns nil; with more than one base each call gets at most
// perTry of ctx's time. It returns the last error when none answered, or
// as soon as ctx is done.
func (p *Peers) Try(ctx context.Context, perTry time.Duration, ask func(ctx context.Context, base string) error) error {
	first := int(p.cur.Load())
	var err error
	for k := range p.bases {
		i := (first + k) % len(p.bases)
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if len(p.bases) > 1 {
			tctx, cancel = context.WithTimeout(ctx, perTry)
		}
		err = ask(tctx, p.bases[i])
		cancel()
		if err == nil {
			p.cur.Store(int32(i))
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return err
}
