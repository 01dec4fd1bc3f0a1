package backend

import (
	"sync"
	"sync/atomic"
)

// Push frames lent from a pool. A publish's push frame lives from the
// reader, through the archive's sequencer (or committer), to the queues of
// the channel's subscribers, until the last of them has written it to its
// socket; allocated fresh for every publish, push frames were about half
// of the relay's allocation per message, and with them the frequency of
// garbage collections, whose pauses showed in the delivery latency's tail.
// The publish carries its frame's buffer (Request.Buf) to fan-out, which
// counts the queues it hands the frame to; the last to be done with it
// gives it back. A frame that is never fanned out (a publish refused, a
// commit that failed) is left to the collector.

// PushBuf is a lent push frame's buffer. Fan-out starts its count
// (Share) and each queue that takes the frame holds one (Ref); the last
// Release gives it back.
type PushBuf struct {
	b     []byte
	class int
	refs  atomic.Int32
}

// Share starts the count of a frame being fanned out, with fan-out's own
// reference.
func (pb *PushBuf) Share() { pb.refs.Store(1) }

// Ref counts one more queue holding the frame.
func (pb *PushBuf) Ref() { pb.refs.Add(1) }

// pushClasses are the capacities lent; a larger frame is allocated.
var pushClasses = [...]int{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}

var pushPools [len(pushClasses)]sync.Pool

// suffixRoom is the most PushSuffix appends.
const suffixRoom = 96

// LendPushPrefix is PushPrefix in a lent buffer, which it returns with the
// frame; a frame too large for every class is allocated, with no buffer.
func LendPushPrefix(channel string, b64len int) ([]byte, *PushBuf) {
	need := 48 + len(channel) + b64len + suffixRoom
	class := -1
	for i, n := range pushClasses {
		if need <= n {
			class = i
			break
		}
	}
	if class < 0 {
		return PushPrefix(channel, b64len), nil
	}
	pb, _ := pushPools[class].Get().(*PushBuf)
	if pb == nil {
		pb = &PushBuf{b: make([]byte, 0, pushClasses[class]), class: class}
	}
	b := append(pb.b[:0], `{"type":"message","channel":"`...)
	b = append(b, channel...)
	return append(b, `","payload":"`...), pb
}

// Holds reports whether the frame f still lives in pb's buffer: one that
// outgrew it was copied out by append, and the buffer is not its own.
func (pb *PushBuf) Holds(f []byte) bool {
	return pb != nil && len(f) > 0 && &f[0] == &pb.b[:1][0]
}

// Release drops one reference to a lent frame; the last gives it back.
func (pb *PushBuf) Release() {
	if pb != nil && pb.refs.Add(-1) == 0 {
		pb.b = pb.b[:0]
		pushPools[pb.class].Put(pb)
	}
}
