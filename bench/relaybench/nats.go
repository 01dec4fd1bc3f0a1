package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTarget is a nats-server: core NATS on one subject for fan-out and
// latency, a JetStream file-storage stream per durable channel.
type natsTarget struct {
	o       options
	ctl     *nats.Conn
	fan     string   // the fan-out subject
	streams []string // a stream per durable channel
	subject []string // its one subject
}

// natsArchiveCap is each durable stream's bound, the relay's default
// archive cap per channel.
const natsArchiveCap = 1000

func newNATS(ctx context.Context, o options, durables int) (*natsTarget, error) {
	nc, err := natsConnect(o.nats)
	if err != nil {
		return nil, err
	}
	var id [6]byte
	rand.Read(id[:])
	run := hex.EncodeToString(id[:])
	n := &natsTarget{o: o, ctl: nc, fan: "bench." + run + ".fanout"}
	if durables == 0 {
		return n, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	for i := range durables {
		name, subj := fmt.Sprintf("BENCH_%s_%d", run, i), fmt.Sprintf("bench.%s.durable.%d", run, i)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage,
			MaxMsgs: natsArchiveCap, Discard: jetstream.DiscardOld,
		})
		if err != nil {
			n.close()
			return nil, fmt.Errorf("JetStream stream: %w", err)
		}
		n.streams, n.subject = append(n.streams, name), append(n.subject, subj)
	}
	return n, nil
}

func natsConnect(url string) (*nats.Conn, error) {
	return nats.Connect(url, nats.Name("relaybench"), nats.NoReconnect())
}

func (n *natsTarget) String() string {
	return fmt.Sprintf("nats-server %s at %s, core NATS for fan-out, JetStream file store for durable", n.ctl.ConnectedServerVersion(), n.o.nats)
}

func (n *natsTarget) wireMessages() bool { return false }

func (n *natsTarget) close() {
	if len(n.streams) > 0 {
		if js, err := jetstream.New(n.ctl); err == nil {
			for _, s := range n.streams {
				js.DeleteStream(context.Background(), s)
			}
		}
	}
	n.ctl.Close()
}

// natsSub is one connection subscribed to the fan-out subject.
type natsSub struct {
	nc *nats.Conn
	ch chan *nats.Msg
}

// natsSubQueue is a subscriber's queue of messages, above the most a
// fan-out leaves outstanding (a full queue drops messages, and the
// fan-out then reports a stall). nats.go's default, 65,536, would take
// half a megabyte per subscriber.
const natsSubQueue = 4096

func (n *natsTarget) subscribers(ctx context.Context, count int) ([]subscriber, error) {
	return openAll(count, func(int) (subscriber, error) {
		nc, err := natsConnect(n.o.nats)
		if err != nil {
			return nil, err
		}
		ch := make(chan *nats.Msg, natsSubQueue)
		_, err = nc.ChanSubscribe(n.fan, ch)
		if err == nil {
			// The subscription is on the server once the flush is
			// answered.
			err = nc.FlushTimeout(10 * time.Second)
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &natsSub{nc, ch}, nil
	})
}

// receive takes the next message and those queued behind it, as a
// WebSocket message carries the pushes queued for it.
func (s *natsSub) receive(ctx context.Context, h *hist) (int, error) {
	var m *nats.Msg
	select {
	case m = <-s.ch:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n := 0
	for {
		n++
		if h != nil && len(m.Data) >= 8 {
			h.add(now() - int64(binary.BigEndian.Uint64(m.Data)))
		}
		if len(s.ch) == 0 {
			return n, nil
		}
		m = <-s.ch
	}
}

func (s *natsSub) close() { s.nc.Close() }

// natsPub publishes on the fan-out subject with core NATS.
type natsPub struct {
	nc      *nats.Conn
	subj    string
	payload []byte
}

func (n *natsTarget) publisher(ctx context.Context) (publisher, error) {
	nc, err := natsConnect(n.o.nats)
	if err != nil {
		return nil, err
	}
	return &natsPub{nc: nc, subj: n.fan, payload: randomPayload(n.o.size)}, nil
}

func randomPayload(size int) []byte {
	b := make([]byte, size)
	rand.Read(b)
	return b
}

func (p *natsPub) publish(context.Context) error {
	binary.BigEndian.PutUint64(p.payload, uint64(now()))
	return p.nc.Publish(p.subj, p.payload) // copied into the connection's buffer
}

func (p *natsPub) close() { p.nc.Close() }

// natsDurable publishes to one JetStream stream: asynchronously with its
// acks read in order, or, with one in flight, with the synchronous
// publish that returns the ack.
type natsDurable struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subj    string
	size    int
	sync    bool
	pending chan jetstream.PubAckFuture // async: the futures, in order
	synced  chan error                  // sync: each publish's outcome
	closed  chan struct{}
	once    sync.Once
}

func (n *natsTarget) durables(ctx context.Context, conns, inflight int) ([]durablePublisher, error) {
	if conns > len(n.subject) {
		return nil, fmt.Errorf("%d durable connections, %d streams", conns, len(n.subject))
	}
	var out []durablePublisher
	for i := range conns {
		nc, err := natsConnect(n.o.nats)
		if err != nil {
			for _, d := range out {
				d.close()
			}
			return nil, err
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(inflight))
		if err != nil {
			nc.Close()
			for _, d := range out {
				d.close()
			}
			return nil, err
		}
		out = append(out, &natsDurable{
			nc: nc, js: js, subj: n.subject[i], size: n.o.size, sync: inflight == 1,
			pending: make(chan jetstream.PubAckFuture, inflight+1), synced: make(chan error, 1),
			closed: make(chan struct{}),
		})
	}
	return out, nil
}

func (d *natsDurable) publish(ctx context.Context) error {
	// A fresh payload each time: an async publish keeps its message until
	// the ack, to publish it again on a retry.
	payload := randomPayload(d.size)
	binary.BigEndian.PutUint64(payload, uint64(now()))
	if d.sync {
		_, err := d.js.Publish(ctx, d.subj, payload)
		select {
		case d.synced <- err:
		case <-d.closed:
		}
		return nil
	}
	f, err := d.js.PublishAsync(d.subj, payload)
	if err != nil {
		return err
	}
	select {
	case d.pending <- f:
	case <-d.closed:
	}
	return nil
}

var errClosed = errors.New("closed")

func (d *natsDurable) acked(ctx context.Context) (int, error) {
	if d.sync {
		select {
		case err := <-d.synced:
			if err != nil {
				return 0, err
			}
			return 1, nil
		case <-d.closed:
			return 0, errClosed
		}
	}
	var f jetstream.PubAckFuture
	select {
	case f = <-d.pending:
	case <-d.closed:
		return 0, errClosed
	}
	select {
	case <-f.Ok():
		return 1, nil
	case err := <-f.Err():
		return 0, err
	case <-d.closed:
		return 0, errClosed
	}
}

func (d *natsDurable) close() {
	d.once.Do(func() {
		close(d.closed)
		d.nc.Close()
	})
}
