package relay

import (
	"encoding/binary"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// Entry types stored with every archived message and pushed with every live
// one. They are read from the cleartext MLSMessage header only (RFC 9420 §6);
// the relay never looks at content.
const (
	EntryApp     = backend.EntryApp // application messages and anything that is not an MLS handshake
	EntryCommit  = 1                // PublicMessage or PrivateMessage carrying a commit or a proposal
	EntryWelcome = 2                // MLSMessage with wire_format mls_welcome
)

// RFC 9420 §6 wire formats and content types.
const (
	mlsVersion10 = 1

	wireFormatPublic  = 1
	wireFormatPrivate = 2
	wireFormatWelcome = 3

	contentApplication = 1
	contentProposal    = 2
	contentCommit      = 3

	senderMember            = 1
	senderExternal          = 2
	senderNewMemberProposal = 3
	senderNewMemberCommit   = 4
)

// header is what the relay learns from a payload's cleartext MLS header.
type header struct {
	entryType uint8
	commit    bool   // the content type is commit (the message is fenced)
	epoch     uint64 // valid for PublicMessage and PrivateMessage
}

// classify reads the cleartext MLSMessage header of b. Bytes that do not
// parse as the start of an MLSMessage are application data (EntryApp): the
// relay carries non-MLS payloads such as sealed sync batches untouched.
func classify(b []byte) header {
	r := reader(b)
	version, ok1 := r.u16()
	wire, ok2 := r.u16()
	if !ok1 || !ok2 || version != mlsVersion10 {
		return header{}
	}
	switch wire {
	case wireFormatWelcome:
		return header{entryType: EntryWelcome}
	case wireFormatPublic:
		// FramedContent: group_id<V>, epoch, sender, authenticated_data<V>, content_type.
		if !r.skipVector() {
			return header{}
		}
		epoch, ok := r.u64()
		if !ok {
			return header{}
		}
		st, ok := r.u8()
		if !ok {
			return header{}
		}
		switch st {
		case senderMember, senderExternal:
			if _, ok := r.u32(); !ok {
				return header{}
			}
		case senderNewMemberProposal, senderNewMemberCommit:
		default:
			return header{}
		}
		if !r.skipVector() {
			return header{}
		}
		ct, ok := r.u8()
		if !ok {
			return header{}
		}
		return contentHeader(ct, epoch)
	case wireFormatPrivate:
		// PrivateMessage: group_id<V>, epoch, content_type, ...
		if !r.skipVector() {
			return header{}
		}
		epoch, ok := r.u64()
		if !ok {
			return header{}
		}
		ct, ok := r.u8()
		if !ok {
			return header{}
		}
		return contentHeader(ct, epoch)
	}
	return header{}
}

func contentHeader(ct uint8, epoch uint64) header {
	switch ct {
	case contentCommit:
		return header{entryType: EntryCommit, commit: true, epoch: epoch}
	case contentProposal:
		return header{entryType: EntryCommit, epoch: epoch}
	}
	return header{epoch: epoch}
}

// reader is a minimal TLS-presentation reader over untrusted bytes; every
// method reports false instead of reading past the end.
type reader []byte

func (r *reader) take(n int) ([]byte, bool) {
	if n < 0 || len(*r) < n {
		return nil, false
	}
	b := (*r)[:n]
	*r = (*r)[n:]
	return b, true
}

func (r *reader) u8() (uint8, bool) {
	b, ok := r.take(1)
	if !ok {
		return 0, false
	}
	return b[0], true
}

func (r *reader) u16() (uint16, bool) {
	b, ok := r.take(2)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint16(b), true
}

func (r *reader) u32() (uint32, bool) {
	b, ok := r.take(4)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

func (r *reader) u64() (uint64, bool) {
	b, ok := r.take(8)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// varint reads a vector length header (RFC 9420 §2.1.2): the top two bits of
// the first byte give the size (1, 2 or 4 bytes; 0b11 is invalid), and the
// encoding must be the shortest one for the value.
func (r *reader) varint() (uint32, bool) {
	first, ok := r.u8()
	if !ok {
		return 0, false
	}
	var v uint32
	switch first >> 6 {
	case 0:
		return uint32(first), true
	case 1:
		b, ok := r.take(1)
		if !ok {
			return 0, false
		}
		v = uint32(first&0x3f)<<8 | uint32(b[0])
		if v < 1<<6 {
			return 0, false
		}
	case 2:
		b, ok := r.take(3)
		if !ok {
			return 0, false
		}
		v = uint32(first&0x3f)<<24 | uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
		if v < 1<<14 {
			return 0, false
		}
	default:
		return 0, false
	}
	return v, true
}

func (r *reader) skipVector() bool {
	n, ok := r.varint()
	if !ok {
		return false
	}
	_, ok = r.take(int(n))
	return ok
}
