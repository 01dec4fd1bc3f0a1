package relay

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestClassify(t *testing.T) {
	gid := bytes.Repeat([]byte{9}, 32)
	long := bytes.Repeat([]byte{1}, 300) // a two-byte varint length
	for _, tc := range []struct {
		name string
		in   []byte
		want header
	}{
		{"public commit", publicMessage(gid, 7, 3), header{entryType: 1, commit: true, epoch: 7}},
		{"public proposal", publicMessage(gid, 7, 2), header{entryType: 1, epoch: 7}},
		{"public app", publicMessage(gid, 7, 1), header{epoch: 7}},
		{"private commit", privateMessage(gid, 1<<40, 3), header{entryType: 1, commit: true, epoch: 1 << 40}},
		{"private proposal", privateMessage(gid, 2, 2), header{entryType: 1, epoch: 2}},
		{"private app", privateMessage(gid, 2, 1), header{epoch: 2}},
		{"long group id", privateMessage(long, 3, 3), header{entryType: 1, commit: true, epoch: 3}},
		{"welcome", welcome(), header{entryType: 2}},
		{"key package", []byte{0, 1, 0, 5, 1, 2}, header{}},
		{"group info", []byte{0, 1, 0, 4, 1, 2}, header{}},
		{"wrong version", append([]byte{0, 2}, publicMessage(gid, 7, 3)[2:]...), header{}},
		{"unknown wire format", []byte{0, 1, 0, 9, 0}, header{}},
		{"truncated", publicMessage(gid, 7, 3)[:20], header{}},
		{"empty", nil, header{}},
		{"sealed batch", []byte("SKYSEAL1 ......"), header{}},
		{"non-minimal varint", append([]byte{0, 1, 0, 2, 0x40, 0x01, 0xAA}, append(u64(3), 3)...), header{}},
		{"varint 0b11", append([]byte{0, 1, 0, 2, 0xC0, 0, 0, 0, 0, 0, 0, 1}, append(u64(3), 3)...), header{}},
		{"external sender", func() []byte {
			b := publicMessage(gid, 4, 3)
			b[4+1+32+8] = 2
			return b
		}(), header{entryType: 1, commit: true, epoch: 4}},
		{"new member commit", func() []byte {
			b := []byte{0, 1, 0, 1, 1, 'g'}
			b = append(b, u64(11)...)
			b = append(b, 4, 2, 'a', 'd', 3)
			return b
		}(), header{entryType: 1, commit: true, epoch: 11}},
		{"bad sender type", func() []byte {
			b := publicMessage(gid, 4, 3)
			b[4+1+32+8] = 9
			return b
		}(), header{}},
	} {
		if got := classify(tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// buildHeader encodes the fields classify reads, for the round trip below.
func buildHeader(wire uint16, gid []byte, epoch uint64, senderType uint8, ad []byte, ct uint8) []byte {
	b := []byte{0, 1, 0, 0}
	binary.BigEndian.PutUint16(b[2:], wire)
	switch wire {
	case wireFormatPublic:
		b = append(b, vlen(len(gid))...)
		b = append(b, gid...)
		b = append(b, u64(epoch)...)
		b = append(b, senderType)
		if senderType == senderMember || senderType == senderExternal {
			b = append(b, 0, 0, 0, 1)
		}
		b = append(b, vlen(len(ad))...)
		b = append(b, ad...)
		b = append(b, ct)
	case wireFormatPrivate:
		b = append(b, vlen(len(gid))...)
		b = append(b, gid...)
		b = append(b, u64(epoch)...)
		b = append(b, ct)
	}
	return b
}

// FuzzClassify checks that classify never panics on arbitrary bytes, and
// that a header built from the fuzzed fields is read back as built.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1}, uint16(1), []byte("gid"), uint64(5), uint8(1), []byte("ad"), uint8(3))
	f.Add(welcome(), uint16(2), []byte{}, uint64(0), uint8(4), []byte{}, uint8(2))
	f.Add(privateMessage([]byte("g"), 3, 3), uint16(3), bytes.Repeat([]byte{1}, 70), uint64(1<<63), uint8(2), bytes.Repeat([]byte{2}, 100), uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, wire uint16, gid []byte, epoch uint64, senderType uint8, ad []byte, ct uint8) {
		classify(raw)
		if wire != wireFormatPublic && wire != wireFormatPrivate {
			return
		}
		senderType = senderType%4 + 1
		b := buildHeader(wire, gid, epoch, senderType, ad, ct)
		got := classify(append(b, raw...))
		want := header{epoch: epoch}
		switch ct {
		case contentCommit:
			want.entryType, want.commit = EntryCommit, true
		case contentProposal:
			want.entryType = EntryCommit
		}
		if got != want {
			t.Fatalf("classify(%x) = %+v, want %+v", b, got, want)
		}
	})
}
