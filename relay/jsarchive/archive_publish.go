package jsarchive

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

// Start starts the publish pipeline and the sweep.
func (a *archive) Start() {
	a.stopSweep, a.sweepDone = make(chan struct{}), make(chan struct{})
	a.wg.Go(a.runSender)
	a.wg.Go(a.runAnswerer)
	go a.runSweep()
}

// deliver is the consumer's handler: it mirrors the message and pushes it
// to this relay's subscribers.
func (a *archive) deliver(m jetstream.Msg) {
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
	a.hub.Fanout(ch, f, nil, from)
}

func (a *archive) Submit(r backend.Request) { a.reqs <- &r }

func (a *archive) Acquire(n int64) { a.inflight.Acquire(context.Background(), n) }

// WaitVisible has nothing to wait for: an entry is pushed only once
// JetStream stored it, and reads ask JetStream's stream leader.
func (a *archive) WaitVisible(context.Context) error { return nil }

// runSender takes requests in arrival order: application entries are
// published asynchronously (JetStream keeps a connection's order), a
// handshake entry waits for its compare-and-set, and everything goes on to
// runAnswerer in the same order.
func (a *archive) runSender() {
	defer close(a.answers)
	for r := range a.reqs {
		if r.Reply == nil && !r.Fence {
			p, err := a.channelPayer(r.Channel, r.Sub)
			if err != nil {
				a.answers <- jsAnswer{r: r, err: err, uncharged: true}
				continue
			}
			r.Sub = p
		}
		switch {
		case r.Reply != nil:
			a.answers <- jsAnswer{r: r}
		case r.Fence:
			a.answers <- jsAnswer{r: r, err: a.fenceReset(r.Channel, r.ResetTo, r.ResetID)}
		case r.EntryType == backend.EntryApp:
			if scope := a.charge(r.Sub, int64(len(r.Payload))); scope != "" {
				r.Refused = backend.QuotaFrame(scope)
				a.answers <- jsAnswer{r: r}
				continue
			}
			m := a.message(a.appSubject(r.Channel), r)
			paf, err := a.js.PublishMsgAsync(m)
			a.answers <- jsAnswer{r: r, paf: paf, sent: time.Now(), err: err}
		default:
			seq, err := a.publishHandshake(r)
			a.answers <- jsAnswer{r: r, seq: seq, err: err}
		}
	}
}

func (a *archive) message(subj string, r *backend.Request) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Data = r.Payload
	m.Header.Set(hdrTS, strconv.FormatInt(backend.CoarseMillis(a.now(), a.granularity), 10))
	// Every publish has an id, so the relay may try it again after a
	// timeout (see jsTry) and JetStream stores it once: the client's, if
	// it gave one (scoped to its account and channel, see dedup.go), so
	// its own retry is stored once as well; else one of the relay's.
	id := r.ID
	if id == "" {
		id = a.node + "." + strconv.FormatUint(a.msgIDs.Add(1), 10)
	}
	m.Header.Set(jetstream.MsgIDHeader, id)
	if r.Conn != nil {
		a.omu.Lock()
		a.origins[id] = origin{conn: r.Conn.ID(), at: time.Now()}
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
func (a *archive) publishRetry(start time.Time, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
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
func (a *archive) head(channel string, fresh bool) (jsHead, error) {
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
func (a *archive) learn(channel string, hd jsHead) {
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
// moved in the same compare-and-set; a refusal is left in r.Refused.
func (a *archive) publishHandshake(r *backend.Request) (uint64, error) {
	n := int64(len(r.Payload))
	fresh := false
	for range casAttempts {
		hd, err := a.head(r.Channel, fresh)
		if err != nil {
			return 0, err
		}
		fresh = true
		next := hd
		if r.Commit {
			if hd.hasEpoch && r.Epoch != hd.epoch {
				if r.ID != "" {
					// The retry of a commit that moved the fence itself.
					if seq, ok := a.storedAsLast(r.Channel, r.ID); ok {
						return seq, nil
					}
				}
				r.Refused = backend.StaleEpochFrame(hd.epoch)
				return 0, nil
			}
			if r.Epoch == math.MaxUint64 || !hd.hasEpoch && r.Epoch > a.maxFirstEpoch {
				r.Refused = backend.EpochOutOfRangeFrame(a.maxFirstEpoch)
				return 0, nil
			}
			next.hasEpoch, next.epoch = true, r.Epoch+1
		}
		if scope := a.charge(r.Sub, n); scope != "" {
			r.Refused = backend.QuotaFrame(scope)
			return 0, nil
		}
		m := a.message(a.hsSubject(r.Channel), r)
		m.Header.Set(hdrType, strconv.Itoa(int(r.EntryType)))
		m.Header.Set(jetstream.MsgTTLHeader, "never")
		next.header(m.Header)
		ack, err := a.publishRetry(time.Now(), m, jetstream.WithExpectLastSequencePerSubject(hd.seq))
		if isWrongLastSeq(err) && r.ID != "" {
			// The publish may be the retry of one stored a moment ago
			// (JetStream checks the id before the sequence in a
			// cluster, not always on one server): the newest message
			// tells.
			if seq, ok := a.storedAsLast(r.Channel, r.ID); ok {
				a.settle(r.Sub, n, 0, false)
				return seq, nil
			}
		}
		if isWrongLastSeq(err) {
			a.settle(r.Sub, n, 0, false)
			continue
		}
		if err != nil {
			a.settle(r.Sub, n, 0, false)
			return 0, err
		}
		if ack.Duplicate {
			a.settle(r.Sub, n, 0, false)
			return ack.Sequence, nil
		}
		next.seq = ack.Sequence
		a.learn(r.Channel, next)
		a.settle(r.Sub, n, ack.Sequence, true)
		return ack.Sequence, nil
	}
	return 0, errors.New("relay: the channel's handshake subject kept changing")
}

// storedAsLast reports the seq of the channel's newest handshake message
// if it carries the publish id key.
func (a *archive) storedAsLast(channel, key string) (uint64, bool) {
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
func (a *archive) fenceReset(channel string, epoch uint64, id int64) error {
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
		m.Header.Set(hdrTS, strconv.FormatInt(backend.CoarseMillis(a.now(), a.granularity), 10))
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

// NextEpoch reads the fence from the channel's handshake subject itself,
// not the mirror, so it is the fence every relay of the cluster checks.
func (a *archive) NextEpoch(_ context.Context, channel string) (uint64, bool, error) {
	hd, err := a.head(channel, true)
	if err != nil {
		return 0, false, fmt.Errorf("relay: reading the commit fence: %w", err)
	}
	return hd.epoch, hd.hasEpoch, nil
}

func (a *archive) ResetFence(channel string, epoch uint64, id int64) error {
	if epoch == math.MaxUint64 {
		return errors.New("relay: fence reset: the epoch after the last one cannot be expected")
	}
	done := make(chan error, 1)
	a.Submit(backend.Request{Channel: channel, Fence: true, ResetTo: epoch, ResetID: id, Done: done})
	return <-done
}

// runAnswerer answers requests in arrival order, each once JetStream has.
func (a *archive) runAnswerer() {
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
			a.settle(r.Sub, int64(len(r.Payload)), seq, err == nil && !dup)
		} else if err != nil && !p.uncharged && r.Reply == nil && !r.Fence && r.Refused == nil && r.EntryType == backend.EntryApp {
			a.settle(r.Sub, int64(len(r.Payload)), 0, false)
		}
		if err != nil && r.Reply == nil {
			a.log.Error("relay: JetStream publish failed", "err", err)
		}
		a.answer(r, seq, err)
	}
}

func (a *archive) answer(r *backend.Request, seq uint64, err error) {
	if r.Weight > 0 {
		a.inflight.Release(r.Weight)
	}
	if r.Done != nil {
		r.Done <- err
		return
	}
	if r.Conn == nil {
		return
	}
	r.Conn.Answer(backend.AnswerFrame(r.Reply, r.Refused, seq, err != nil))
}
