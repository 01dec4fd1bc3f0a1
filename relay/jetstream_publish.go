package relay

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// start starts the publish pipeline and the sweep.
func (a *jsArchive) start() {
	a.stopSweep, a.sweepDone = make(chan struct{}), make(chan struct{})
	a.wg.Go(a.runSender)
	a.wg.Go(a.runAnswerer)
	go a.runSweep()
}

// deliver is the consumer's handler: it mirrors the message and pushes it
// to this relay's subscribers.
func (a *jsArchive) deliver(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	seq := md.Sequence.Stream
	data := m.Data()
	ch, et, ts, ok := a.apply(seq, m.Subject(), m.Headers(), int64(len(data)))
	if !ok {
		return
	}
	var from uint64
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		a.omu.Lock()
		if o, ok := a.origins[id]; ok {
			from = o.conn
			delete(a.origins, id)
		}
		a.omu.Unlock()
	}
	if node, id, ok := strings.Cut(m.Headers().Get(hdrOrigin), "."); ok && node == a.node {
		from, _ = strconv.ParseUint(id, 10, 64) // a message from before origins
	}
	f := backend.PushPrefix(ch, base64.StdEncoding.EncodedLen(len(data)))
	f = base64.StdEncoding.AppendEncode(f, data)
	f = backend.PushSuffix(f, seq, et, ts)
	a.hub.fanoutExcept(ch, f, from)
}

func (a *jsArchive) submit(r *pubReq) { a.reqs <- r }

func (a *jsArchive) acquire(n int64) { a.inflight.Acquire(context.Background(), n) }

// waitVisible has nothing to wait for: an entry is pushed only once
// JetStream stored it, and reads ask JetStream's stream leader.
func (a *jsArchive) waitVisible(context.Context) error { return nil }

// runSender takes requests in arrival order: application entries are
// published asynchronously (JetStream keeps a connection's order), a
// handshake entry waits for its compare-and-set, and everything goes on to
// runAnswerer in the same order.
func (a *jsArchive) runSender() {
	defer close(a.answers)
	for r := range a.reqs {
		if r.reply == nil && !r.fence {
			p, err := a.channelPayer(r.channel, r.sub)
			if err != nil {
				a.answers <- jsAnswer{r: r, err: err, uncharged: true}
				continue
			}
			r.sub = p
		}
		switch {
		case r.reply != nil:
			a.answers <- jsAnswer{r: r}
		case r.fence:
			a.answers <- jsAnswer{r: r, err: a.fenceReset(r.channel, r.resetTo, r.resetID)}
		case r.hdr.entryType == EntryApp:
			if scope := a.charge(r.sub, int64(len(r.payload))); scope != "" {
				r.refused = backend.QuotaFrame(scope)
				a.answers <- jsAnswer{r: r}
				continue
			}
			m := a.message(a.appSubject(r.channel), r)
			paf, err := a.js.PublishMsgAsync(m)
			a.answers <- jsAnswer{r: r, paf: paf, sent: time.Now(), err: err}
		default:
			seq, err := a.publishHandshake(r)
			a.answers <- jsAnswer{r: r, seq: seq, err: err}
		}
	}
}

func (a *jsArchive) message(subj string, r *pubReq) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Data = r.payload
	m.Header.Set(hdrTS, strconv.FormatInt(coarseMillis(a.now(), a.granularity), 10))
	// Every publish has an id, so the relay may try it again after a
	// timeout (see jsTry) and JetStream stores it once: the client's, if
	// it gave one (scoped to its account and channel, see dedup.go), so
	// its own retry is stored once as well; else one of the relay's.
	id := r.id
	if id == "" {
		id = a.node + "." + strconv.FormatUint(a.msgIDs.Add(1), 10)
	}
	m.Header.Set(jetstream.MsgIDHeader, id)
	if r.c != nil {
		a.omu.Lock()
		a.origins[id] = origin{conn: r.c.id, at: time.Now()}
		a.omu.Unlock()
	}
	return m
}

// retryable reports whether a failed JetStream request may have met a
// leader change, a server lost or a reconnect, and is worth trying again.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// JetStream answered: only "not ready" answers are transient.
		return apiErr.Code == 503
	}
	return err != nil
}

// publishRetry publishes m until it is stored or jsBudget has passed
// since start, jsTry at a time; the message's Nats-Msg-Id keeps the tries
// one entry.
func (a *jsArchive) publishRetry(start time.Time, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), jsTry)
		ack, err := a.js.PublishMsg(ctx, m, opts...)
		cancel()
		if err == nil || !retryable(err) || time.Since(start)+wait > jsBudget {
			return ack, err
		}
		time.Sleep(wait)
		wait = min(2*wait, jsMaxWait)
	}
}

// head returns what the relay knows of a channel's handshake subject,
// reading its last message from JetStream when it knows nothing or fresh
// is set.
func (a *jsArchive) head(channel string, fresh bool) (jsHead, error) {
	if !fresh {
		a.mu.Lock()
		c := a.chans[channel]
		if c != nil && c.known {
			hd := c.head
			a.mu.Unlock()
			return hd, nil
		}
		a.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	m, err := a.stream.GetLastMsgForSubject(ctx, a.hsSubject(channel))
	var hd jsHead
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return jsHead{}, err
	default:
		hd = headOf(m.Sequence, m.Header)
	}
	a.learn(channel, hd)
	return hd, nil
}

// learn records a head read or written, unless the mirror has a newer one.
func (a *jsArchive) learn(channel string, hd jsHead) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chanLocked(channel)
	if hd.seq >= c.head.seq {
		c.head = hd
	}
	c.known = true
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// casAttempts bounds the retries of one handshake publish that keeps
// losing the compare-and-set to other relays.
const casAttempts = 64

// publishHandshake stores a handshake entry with the fence checked and
// moved in the same compare-and-set; a refusal is left in r.refused.
func (a *jsArchive) publishHandshake(r *pubReq) (uint64, error) {
	n := int64(len(r.payload))
	fresh := false
	for range casAttempts {
		hd, err := a.head(r.channel, fresh)
		if err != nil {
			return 0, err
		}
		fresh = true
		next := hd
		if r.hdr.commit {
			if hd.hasEpoch && r.hdr.epoch != hd.epoch {
				if r.id != "" {
					// The retry of a commit that moved the fence itself.
					if seq, ok := a.storedAsLast(r.channel, r.id); ok {
						return seq, nil
					}
				}
				r.refused = backend.StaleEpochFrame(hd.epoch)
				return 0, nil
			}
			if r.hdr.epoch == math.MaxUint64 || !hd.hasEpoch && r.hdr.epoch > a.maxFirstEpoch {
				r.refused = backend.EpochOutOfRangeFrame(a.maxFirstEpoch)
				return 0, nil
			}
			next.hasEpoch, next.epoch = true, r.hdr.epoch+1
		}
		if scope := a.charge(r.sub, n); scope != "" {
			r.refused = backend.QuotaFrame(scope)
			return 0, nil
		}
		m := a.message(a.hsSubject(r.channel), r)
		m.Header.Set(hdrType, strconv.Itoa(int(r.hdr.entryType)))
		m.Header.Set(jetstream.MsgTTLHeader, "never")
		next.header(m.Header)
		ack, err := a.publishRetry(time.Now(), m, jetstream.WithExpectLastSequencePerSubject(hd.seq))
		if isWrongLastSeq(err) && r.id != "" {
			// The publish may be the retry of one stored a moment ago
			// (JetStream checks the id before the sequence in a
			// cluster, not always on one server): the newest message
			// tells.
			if seq, ok := a.storedAsLast(r.channel, r.id); ok {
				a.settle(r.sub, n, 0, false)
				return seq, nil
			}
		}
		if isWrongLastSeq(err) {
			a.settle(r.sub, n, 0, false)
			continue
		}
		if err != nil {
			a.settle(r.sub, n, 0, false)
			return 0, err
		}
		if ack.Duplicate {
			a.settle(r.sub, n, 0, false)
			return ack.Sequence, nil
		}
		next.seq = ack.Sequence
		a.learn(r.channel, next)
		a.settle(r.sub, n, ack.Sequence, true)
		return ack.Sequence, nil
	}
	return 0, errors.New("relay: the channel's handshake subject kept changing")
}

// storedAsLast reports the seq of the channel's newest handshake message
// if it carries the publish id key.
func (a *jsArchive) storedAsLast(channel, key string) (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), jsTry)
	defer cancel()
	m, err := a.stream.GetLastMsgForSubject(ctx, a.hsSubject(channel))
	if err != nil || m.Header.Get(jetstream.MsgIDHeader) != key {
		return 0, false
	}
	return m.Sequence, true
}

// fenceReset stores a fence marker on the channel's handshake subject. A
// reset the directory feed carries (id > 0) is applied once, by whichever
// relay gets to it first: every relay follows the feed.
func (a *jsArchive) fenceReset(channel string, epoch uint64, id int64) error {
	for range casAttempts {
		hd, err := a.head(channel, true)
		if err != nil {
			return err
		}
		if id > 0 && hd.reset >= id {
			return nil
		}
		next := jsHead{hasEpoch: true, epoch: epoch, reset: max(hd.reset, id)}
		m := nats.NewMsg(a.hsSubject(channel))
		m.Header.Set(hdrType, fenceMarker)
		m.Header.Set(hdrTS, strconv.FormatInt(coarseMillis(a.now(), a.granularity), 10))
		m.Header.Set(jetstream.MsgTTLHeader, "never")
		m.Header.Set(jetstream.MsgIDHeader, a.node+".f"+strconv.FormatUint(a.msgIDs.Add(1), 10))
		next.header(m.Header)
		ack, err := a.publishRetry(time.Now(), m, jetstream.WithExpectLastSequencePerSubject(hd.seq))
		if isWrongLastSeq(err) {
			continue
		}
		if err != nil {
			return err
		}
		next.seq = ack.Sequence
		a.learn(channel, next)
		return nil
	}
	return errors.New("relay: the channel's handshake subject kept changing")
}

// nextEpoch reads the fence from the channel's handshake subject itself,
// not the mirror, so it is the fence every relay of the cluster checks.
func (a *jsArchive) nextEpoch(_ context.Context, channel string) (uint64, bool, error) {
	hd, err := a.head(channel, true)
	if err != nil {
		return 0, false, fmt.Errorf("relay: reading the commit fence: %w", err)
	}
	return hd.epoch, hd.hasEpoch, nil
}

func (a *jsArchive) resetFence(channel string, epoch uint64, id int64) error {
	if epoch == math.MaxUint64 {
		return errors.New("relay: fence reset: the epoch after the last one cannot be expected")
	}
	done := make(chan error, 1)
	a.submit(&pubReq{channel: channel, fence: true, resetTo: epoch, resetID: id, done: done})
	return <-done
}

// runAnswerer answers requests in arrival order, each once JetStream has.
func (a *jsArchive) runAnswerer() {
	for p := range a.answers {
		r := p.r
		seq, err := p.seq, p.err
		if p.paf != nil {
			dup := false
			select {
			case ack := <-p.paf.Ok():
				seq, dup = ack.Sequence, ack.Duplicate
			case err = <-p.paf.Err():
				// A timeout or a lost server: the same message again,
				// on the stream's leader now (stored once by its id).
				if retryable(err) {
					var ack *jetstream.PubAck
					if ack, err = a.publishRetry(p.sent, p.paf.Msg()); err == nil {
						seq, dup = ack.Sequence, ack.Duplicate
					}
				}
			}
			// A duplicate's bytes are the first publish's, charged then.
			a.settle(r.sub, int64(len(r.payload)), seq, err == nil && !dup)
		} else if err != nil && !p.uncharged && r.reply == nil && !r.fence && r.refused == nil && r.hdr.entryType == EntryApp {
			a.settle(r.sub, int64(len(r.payload)), 0, false)
		}
		if err != nil && r.reply == nil {
			a.log.Error("relay: JetStream publish failed", "err", err)
		}
		a.answer(r, seq, err)
	}
}

func (a *jsArchive) answer(r *pubReq, seq uint64, err error) {
	if r.weight > 0 {
		a.inflight.Release(r.weight)
	}
	if r.done != nil {
		r.done <- err
		return
	}
	if r.c == nil {
		return
	}
	f := r.reply
	switch {
	case f != nil:
	case r.refused != nil:
		f = r.refused
	case err != nil:
		f = backend.ErrorFrame("internal", "the archive could not store the message")
	default:
		f = backend.AckFrame(seq)
	}
	r.c.pushAnswer(f)
	r.c.pending.Add(-1)
}
