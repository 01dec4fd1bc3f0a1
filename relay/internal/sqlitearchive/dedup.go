package sqlitearchive

import (
	"time"
)

// Publish ids (relay.MaxPublishID, the scoped keys the relay makes of
// them): on SQLite the archive keeps the ids of the duplicate window in
// memory, at most dedupMax of them (the oldest go first), so a relay
// restarted forgets them: the window holds within one run of the relay.

// dedupMax bounds the ids the SQLite archive remembers (about 150 bytes
// each): past it the oldest are forgotten before their window ends.
const dedupMax = 1 << 16

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
