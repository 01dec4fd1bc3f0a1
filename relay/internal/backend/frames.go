package backend

import (
	"encoding/json"
	"strconv"
)

// Relay-to-client frames the archives build: the answers to a publish,
// and push frames.

// AckFrame acknowledges a publish stored at seq.
func AckFrame(seq uint64) []byte {
	b := make([]byte, 0, 56)
	b = append(b, `{"type":"ok","message":"published","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	return append(b, '}')
}

// AnswerFrame is the answer to a request: its reply, if it is one; else
// refused, the refusal the archive decided (a fence, a budget) or the ack
// it repeats (a publish id seen before), if any; else "internal" when the
// request failed to be stored, or the ack of seq.
func AnswerFrame(reply, refused []byte, seq uint64, failed bool) []byte {
	switch {
	case reply != nil:
		return reply
	case refused != nil:
		return refused
	case failed:
		return ErrorFrame("internal", "the archive could not store the message")
	default:
		return AckFrame(seq)
	}
}

// ErrorFrame refuses with code and message.
func ErrorFrame(code, message string) []byte {
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}{"error", code, message})
	return b
}

// StaleEpochFrame refuses a commit for another epoch than expected, the
// one the channel expects next.
func StaleEpochFrame(expected uint64) []byte {
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Epoch   uint64 `json:"epoch"`
		Message string `json:"message"`
	}{"error", "stale_epoch", expected, "commit is not for the epoch the channel expects; sync and retry"})
	return b
}

// EpochOutOfRangeFrame refuses a commit that would set a fence no group
// could reach: a first commit above maxFirst, or any at the last epoch.
func EpochOutOfRangeFrame(maxFirst uint64) []byte {
	b, _ := json.Marshal(struct {
		Type     string `json:"type"`
		Code     string `json:"code"`
		MaxEpoch uint64 `json:"max_epoch"`
		Message  string `json:"message"`
	}{"error", "epoch_out_of_range", maxFirst, "a channel's first commit must carry an epoch up to max_epoch, and no commit may carry the last epoch"})
	return b
}

// PushPrefix starts a push frame: everything up to and including the
// payload. The archive appends the rest once the sequence number is known.
// Channel names and base64 need no JSON escaping.
func PushPrefix(channel string, b64len int) []byte {
	b := make([]byte, 0, 48+len(channel)+b64len+64)
	b = append(b, `{"type":"message","channel":"`...)
	b = append(b, channel...)
	b = append(b, `","payload":"`...)
	return b
}

// PushSuffix ends a push frame begun by PushPrefix, once the payload is
// in it.
func PushSuffix(b []byte, seq uint64, entryType uint8, ts int64) []byte {
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"entry_type":`...)
	b = strconv.AppendUint(b, uint64(entryType), 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	return append(b, '}')
}
