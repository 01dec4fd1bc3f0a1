package jsarchive

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// jsEntry is an entry within the caps, in a relay's mirror.
type jsEntry struct {
	seq uint64
	ts  int64
	sub string
	n   int64
}

// jsChan is a relay's mirror of one channel.
type jsChan struct {
	payer   string    // whom the channel's entries are charged to (relay/budget.go)
	paid    bool      // payer is the channel's payer record's
	app, hs []jsEntry // oldest first; hs includes fence markers (n 0)
	head    jsHead
	known   bool // head is the newest the relay has seen (not only a guess)
	// The drop floors: the newest application entry and the newest
	// handshake entry (not a fence marker) the mirror saw leave by the
	// cap or the TTL. A read from below one is truncated.
	dropApp, dropHS uint64
}

// dropped records that e left a channel's application (hs false) or
// handshake log.
func (c *jsChan) dropped(e jsEntry, hs bool) {
	switch {
	case !hs:
		c.dropApp = max(c.dropApp, e.seq)
	case e.n > 0:
		c.dropHS = max(c.dropHS, e.seq)
	}
}

// The mirror.

func (a *archive) chanLocked(name string) *jsChan {
	c := a.chans[name]
	if c == nil {
		c = &jsChan{}
		a.chans[name] = c
	}
	return c
}

// channelPayer returns whom the entries of ch are charged to: the payer
// of its record. For a channel whose record the mirror has not seen, it
// writes one, naming the payer the mirror knows from older entries'
// headers, else sub, the first publisher; when another relay wrote the
// record first, it reads that one. The record is in the stream before
// the publish that follows, so the mirror applies it first.
func (a *archive) channelPayer(ch, sub string) (string, error) {
	a.mu.Lock()
	c := a.chanLocked(ch)
	if c.paid {
		p := c.payer
		a.mu.Unlock()
		return p, nil
	}
	if c.payer != "" {
		sub = c.payer
	}
	a.mu.Unlock()
	p, err := a.writePayer(ch, sub)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c = a.chanLocked(ch)
	c.payer, c.paid = a.intern(p), true
	return c.payer, nil
}

// writePayer stores the payer record of ch naming sub unless the channel
// has one; it returns the payer the stored record names.
func (a *archive) writePayer(ch, sub string) (string, error) {
	start, wait := time.Now(), 50*time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), jsTry)
		_, err := a.payers.Create(ctx, token(ch), []byte(sub))
		if errors.Is(err, jetstream.ErrKeyExists) {
			var e jetstream.KeyValueEntry
			if e, err = a.payers.Get(ctx, token(ch)); err == nil {
				sub = string(e.Value())
			}
		}
		cancel()
		if err == nil || !retryable(err) || time.Since(start)+wait > jsBudget {
			return sub, err
		}
		time.Sleep(wait)
		wait = min(2*wait, jsMaxWait)
	}
}

// paid reports whether the mirror holds the payer record of ch.
func (a *archive) paid(ch string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chans[ch]
	return c != nil && c.paid
}

// readPayer returns the payer record of ch, "" for none.
func (a *archive) readPayer(ch string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	e, err := a.payers.Get(ctx, token(ch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// bindPayers creates the payer bucket, with the stream's replicas, if it
// does not exist, or binds to it.
func bindPayers(ctx context.Context, js jetstream.JetStream, stream string, replicas int) (jetstream.KeyValue, error) {
	bucket := stream + payersSuffix
	var kv jetstream.KeyValue
	err := setupRetry(ctx, "bucket "+bucket, jsSetupTry, func(ctx context.Context) (err error) {
		kv, err = js.KeyValue(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:      bucket,
				Description: "Skytale relay archive: each channel's payer",
				History:     1,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
			})
		}
		return err
	})
	return kv, err
}

// payersSuffix makes the payer bucket's name from the stream's.
const payersSuffix = "_PAYERS"

// loadPayers reads every payer record into the mirror. A try cut off
// part way is tried again whole (applying a record twice is harmless),
// with the whole setup time for each try: a large bucket takes long.
func (a *archive) loadPayers(ctx context.Context) error {
	w, err := a.payers.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-w.Updates():
			if e == nil {
				return nil // the records there were at the start
			}
			b, err := base64.RawURLEncoding.DecodeString(e.Key())
			if err != nil {
				continue
			}
			a.mu.Lock()
			c := a.chanLocked(string(b))
			c.payer, c.paid = a.intern(string(e.Value())), true
			a.mu.Unlock()
		}
	}
}

func (a *archive) intern(sub string) string {
	if s, ok := a.subs[sub]; ok {
		return s
	}
	a.subs[sub] = sub
	return sub
}

// apply adds one message of the stream to the mirror; it reports the
// channel, entry type and time when the message is an entry to deliver.
func (a *archive) apply(seq uint64, subj string, h nats.Header, n int64) (channel string, et uint8, ts int64, entry bool) {
	kind, ch, ok := a.parseSubject(subj)
	if !ok {
		return "", 0, 0, false
	}
	ts, _ = strconv.ParseInt(h.Get(hdrTS), 10, 64)
	typ := h.Get(hdrType)
	marker := kind == 'h' && typ == fenceMarker
	// The payer record of a channel another relay started: read once.
	var payer string
	if !marker && h.Get(hdrSub) == "" && !a.paid(ch) {
		var err error
		if payer, err = a.readPayer(ch); err != nil {
			a.log.Error("relay: reading a channel's payer failed", "err", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq <= a.hw {
		return "", 0, 0, false
	}
	a.hw = seq
	c := a.chanLocked(ch)
	// An entry from before the payer records names the payer itself.
	sub := c.payer
	if v := h.Get(hdrSub); v != "" {
		sub = a.intern(v)
	} else if payer != "" && !c.paid {
		c.payer, c.paid = a.intern(payer), true
		sub = c.payer
	}
	if c.payer == "" {
		c.payer = sub
	}
	if marker {
		n = 0
	}
	e := jsEntry{seq: seq, ts: ts, sub: sub, n: n}
	list := &c.app
	if kind == 'h' {
		list = &c.hs
		if seq > c.head.seq {
			c.head, c.known = headOf(seq, h), true
		}
	}
	*list = append(*list, e)
	if len(*list) > a.cap {
		a.creditLocked((*list)[0])
		c.dropped((*list)[0], kind == 'h')
		*list = (*list)[1:]
	}
	a.usage.Add(backend.ParsePayer(sub), n)
	if p, ok := a.pendSeq[seq]; ok {
		delete(a.pendSeq, seq)
		a.unpendLocked(p.sub, p.n)
	}
	if marker {
		return "", 0, 0, false
	}
	et = backend.EntryApp
	if kind == 'h' {
		v, _ := strconv.ParseUint(typ, 10, 8)
		et = uint8(v)
	}
	return ch, et, ts, true
}

func (a *archive) creditLocked(e jsEntry) {
	if e.n == 0 {
		return
	}
	a.usage.Add(backend.ParsePayer(e.sub), -e.n)
}

func (a *archive) unpendLocked(sub string, n int64) {
	a.pend.Add(backend.ParsePayer(sub), -n)
}

// charge reserves n bytes of a payer's budgets for a publish; it returns
// the scope of the budget they would pass, or "" once they are reserved.
func (a *archive) charge(sub string, n int64) string {
	p := backend.ParsePayer(sub)
	a.mu.Lock()
	defer a.mu.Unlock()
	if scope := a.budget.Refuse(p, n, a.usage, a.pend); scope != "" {
		return scope
	}
	a.pend.Add(p, n)
	return ""
}

// settle ends the charge of a publish: refused or failed, the bytes go
// back; stored at seq, they move to the mirror's count when the consumer
// reaches seq (at once if it has).
func (a *archive) settle(sub string, n int64, seq uint64, stored bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !stored || seq <= a.hw {
		a.unpendLocked(sub, n)
		return
	}
	a.pendSeq[seq] = pending{sub, n}
}

// Used returns the bytes an account's budget holds, mirrored and charged.
func (a *archive) Used(sub string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.Account[sub] + a.pend.Account[sub]
}

// StoredBytes returns the payload bytes the mirror counts.
func (a *archive) StoredBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.Total
}

// Held returns the bytes the budget of scope holds for key, mirrored
// and charged.
func (a *archive) Held(scope, key string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.Held(scope, key) + a.pend.Held(scope, key)
}

// BudgetUse returns the budgets' use, mirrored and charged, and sizes.
func (a *archive) BudgetUse() (backend.BudgetUse, backend.Limits) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.Use(a.pend), a.budget
}

// replay reads the headers of every message in the stream into the
// mirror, so quotas and fences are known before the relay serves.
func (a *archive) replay(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	info, err := a.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("relay: JetStream stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		a.hw = info.State.LastSeq
		return nil
	}
	cons, err := a.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{a.name + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		HeadersOnly:    true,
	})
	if err != nil {
		return fmt.Errorf("relay: JetStream replay: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("relay: JetStream replay: %w", err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("relay: JetStream replay: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("relay: JetStream replay: %w", err)
		}
		n, _ := strconv.ParseInt(m.Headers().Get("Nats-Msg-Size"), 10, 64)
		a.apply(md.Sequence.Stream, m.Subject(), m.Headers(), n)
		if md.NumPending == 0 || md.Sequence.Stream >= info.State.LastSeq {
			a.replayedFloors()
			return nil
		}
	}
}

// replayedFloors sets the drop floors the replay could not see: the
// stream keeps no record of what the cap pushed out before this relay
// started, so a log the replay found full counts as cut just below its
// oldest entry. (What the TTL removed before then is not known; see the
// relay manual, docs/RELAY.md.)
func (a *archive) replayedFloors() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.chans {
		if len(c.app) >= a.cap && c.app[0].seq > 1 {
			c.dropApp = max(c.dropApp, c.app[0].seq-1)
		}
		if len(c.hs) >= a.cap && c.hs[0].seq > 1 {
			c.dropHS = max(c.dropHS, c.hs[0].seq-1)
		}
	}
}

// floorsOf returns what a read of a channel's log from since reports
// besides its entries: whether an entry after since is gone, and the
// oldest seq of the log within the TTL. first is the page's first entry
// (0 for none) and hw the mirror's high-water mark when the read began.
// An entry is gone when the mirror saw it leave (see jsChan), or when the
// mirror holds an entry from before the read, after since and before
// first, which the stream did not return: the stream's cap pushed it out
// before the mirror learned of it.
func (a *archive) floorsOf(name string, since, first, hw uint64, cutoff int64, appOnly bool) (bool, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chans[name]
	if c == nil {
		return false, first // the mirror has not seen the channel yet
	}
	dropped := c.dropApp
	if !appOnly {
		dropped = max(dropped, c.dropHS)
	}
	trunc := since < dropped
	var oldest uint64
	scan := func(list []jsEntry, hs bool) {
		found := false
		for _, e := range list {
			if hs && e.n == 0 {
				continue // a fence marker, never in a page
			}
			if e.ts < cutoff {
				if e.seq > since {
					trunc = true
				}
				continue
			}
			if !found {
				found = true
				if oldest == 0 || e.seq < oldest {
					oldest = e.seq
				}
			}
			if e.seq > since && e.seq <= hw && (first == 0 || e.seq < first) {
				trunc = true
			}
			if e.seq > since {
				break
			}
		}
	}
	scan(c.app, false)
	if !appOnly {
		scan(c.hs, true)
	}
	if first != 0 && (oldest == 0 || since < oldest || first < oldest) {
		// The page began below every entry the mirror holds, so its
		// first entry is the oldest the stream holds, which the mirror
		// may not know yet (or may still think is gone later).
		oldest = first
	}
	return trunc, oldest
}

// HandshakeLimit is the largest handshake payload the NATS servers admit.
func (a *archive) HandshakeLimit() int { return a.maxHandshake }

// LendsFrames is false: the archive builds each push frame from the
// stream's message, which every relay of the stream delivers.
func (a *archive) LendsFrames() bool { return false }
