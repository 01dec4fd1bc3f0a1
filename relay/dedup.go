package relay

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Idempotent publishes. A publish frame may carry "id", a key of at most
// MaxPublishID bytes the client picks: a publish with the id of one the
// archive stored within the duplicate window (the smaller of ArchiveTTL
// and two minutes, backend.DupWindow) is not stored again and is acknowledged with
// the first one's seq. A client that got "internal", or lost its socket
// before the answer, retries with the same id and cannot store an entry
// twice. The id is scoped to the publishing account and the channel, so
// one account's ids never collide with, or suppress, another's.
//
// On JetStream the key is the message's Nats-Msg-Id, and the stream's
// Duplicates window is backend.DupWindow: every relay of a cluster sees it, and it
// survives a relay's restart. On SQLite the relay keeps the ids of the
// window in memory, at most dedupMax of them (the oldest go first), so a
// relay restarted forgets them: the window holds within one run of the
// relay.

// MaxPublishID is the longest "id" a publish frame may carry, in bytes.
const MaxPublishID = 64

// dedupMax bounds the ids the SQLite archive remembers (about 150 bytes
// each): past it the oldest are forgotten before their window ends.
const dedupMax = 1 << 16

// dedupKey is the scoped key of a publish id: the account, the channel and
// the id, hashed (so its length is fixed and it is safe in a NATS header).
func dedupKey(sub, channel, id string) string {
	h := sha256.New()
	for _, s := range []string{sub, channel, id} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return "c" + hex.EncodeToString(h.Sum(nil)[:16])
}

// dedup remembers the seqs of recent publish ids, for the SQLite
// archive's sequencer (one goroutine: no lock).
type dedup struct {
	window time.Duration
	seqs   map[string]dedupEntry
	order  []string // keys, oldest first, from head on
	head   int
}

type dedupEntry struct {
	seq uint64
	at  time.Time
}

func newDedup(window time.Duration) *dedup {
	return &dedup{window: window, seqs: make(map[string]dedupEntry)}
}

// expire forgets the ids older than the window, and the oldest past
// dedupMax.
func (d *dedup) expire(now time.Time) {
	for d.head < len(d.order) {
		key := d.order[d.head]
		e, ok := d.seqs[key]
		if ok && now.Sub(e.at) < d.window && len(d.order)-d.head <= dedupMax {
			break
		}
		delete(d.seqs, key)
		d.order[d.head] = ""
		d.head++
	}
	if d.head > 1024 && d.head > len(d.order)/2 {
		d.order = append(d.order[:0], d.order[d.head:]...)
		d.head = 0
	}
}

// seen returns the seq stored under key within the window.
func (d *dedup) seen(key string, now time.Time) (uint64, bool) {
	d.expire(now)
	e, ok := d.seqs[key]
	return e.seq, ok
}

// add records that key was stored at seq.
func (d *dedup) add(key string, seq uint64, now time.Time) {
	d.seqs[key] = dedupEntry{seq, now}
	d.order = append(d.order, key)
	d.expire(now)
}
