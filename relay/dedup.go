package relay

import (
	"crypto/sha256"
	"encoding/hex"
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
// survives a relay's restart. On SQLite the archive keeps the ids of
// the window in memory (relay/internal/sqlitearchive/dedup.go), so a relay
// restarted forgets them: the window holds within one run of the relay.

// MaxPublishID is the longest "id" a publish frame may carry, in bytes.
const MaxPublishID = 64

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
