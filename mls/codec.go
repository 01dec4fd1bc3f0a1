package mls

import (
	"encoding/binary"
	"errors"
)

// This file implements the TLS presentation language as profiled by
// RFC 9420, Section 2.1, with the variable-length vector headers of
// Section 2.1.2 and the optional values of Section 2.1.3.

// maxVectorLen caps every length read from the wire. RFC 9420 allows
// vectors of up to 2^30-1 bytes. The largest legitimate vector is a
// ratchet tree (in a Welcome's GroupInfo, given out of band, or in a
// saved state): with the X-Wing suite a member costs about 2,660 bytes
// of a tree whose parents are all set (a 1,407-byte leaf and a
// 1,255-byte parent), so a group of 10,000 needs about 27 MB, and 64 MiB
// admits some 25,000 members (with suite 1, about 290 bytes per member,
// far more). A length is also never accepted beyond the bytes actually
// present, so the cap keeps an attacker from making us reserve memory
// for data it never sends.
const maxVectorLen = 1 << 26

var errDecode = errors.New("mls: malformed encoding")

// builder is an append-only encoder. Encoding cannot fail: every length
// a builder writes comes from a Go slice.
type builder struct{ b []byte }

func (b *builder) u8(v uint8)   { b.b = append(b.b, v) }
func (b *builder) u16(v uint16) { b.b = binary.BigEndian.AppendUint16(b.b, v) }
func (b *builder) u32(v uint32) { b.b = binary.BigEndian.AppendUint32(b.b, v) }
func (b *builder) u64(v uint64) { b.b = binary.BigEndian.AppendUint64(b.b, v) }

// raw appends p without a length prefix.
func (b *builder) raw(p []byte) { b.b = append(b.b, p...) }

// varint appends n in the minimal variable-length integer encoding of
// RFC 9420, Section 2.1.2. n must be below 2^30.
func (b *builder) varint(n int) {
	switch {
	case n < 0 || n >= 1<<30:
		panic("mls: internal error: vector too long to encode")
	case n < 1<<6:
		b.u8(uint8(n))
	case n < 1<<14:
		b.u16(uint16(n) | 0x4000)
	default:
		b.u32(uint32(n) | 0x80000000)
	}
}

// vec appends the opaque vector p with its Section 2.1.2 length header.
func (b *builder) vec(p []byte) {
	b.varint(len(p))
	b.raw(p)
}

// vecFunc appends the encoding produced by f as a variable-length vector.
func (b *builder) vecFunc(f func(*builder)) {
	var inner builder
	f(&inner)
	b.vec(inner.b)
}

// optional appends an optional<T> (Section 2.1.3): a presence byte, then
// the value when present.
func (b *builder) optional(present bool, f func(*builder)) {
	if !present {
		b.u8(0)
		return
	}
	b.u8(1)
	f(b)
}

func (b *builder) bytes() []byte { return b.b }

// parser is a strict decoder over a byte slice. Every read returns false
// when the input is short or malformed; a parser never panics.
type parser struct{ s []byte }

func newParser(data []byte) *parser { return &parser{s: data} }

func (p *parser) take(n int) ([]byte, bool) {
	if n < 0 || n > len(p.s) {
		return nil, false
	}
	v := p.s[:n:n]
	p.s = p.s[n:]
	return v, true
}

func (p *parser) u8(v *uint8) bool {
	b, ok := p.take(1)
	if ok {
		*v = b[0]
	}
	return ok
}

func (p *parser) u16(v *uint16) bool {
	b, ok := p.take(2)
	if ok {
		*v = binary.BigEndian.Uint16(b)
	}
	return ok
}

func (p *parser) u32(v *uint32) bool {
	b, ok := p.take(4)
	if ok {
		*v = binary.BigEndian.Uint32(b)
	}
	return ok
}

func (p *parser) u64(v *uint64) bool {
	b, ok := p.take(8)
	if ok {
		*v = binary.BigEndian.Uint64(b)
	}
	return ok
}

// raw reads exactly n bytes into a fresh copy.
func (p *parser) raw(n int, out *[]byte) bool {
	b, ok := p.take(n)
	if ok {
		*out = append([]byte{}, b...)
	}
	return ok
}

// varint reads a variable-length integer header (Section 2.1.2). It
// rejects the reserved 0b11 prefix and any non-minimal encoding.
func (p *parser) varint(n *int) bool {
	v, ok := readVarint(p.s)
	if !ok {
		return false
	}
	p.s = p.s[varintSize(p.s[0]):]
	*n = v
	return true
}

// varintSize returns the length of the header starting with first, or 0
// for the reserved prefix.
func varintSize(first byte) int {
	switch first >> 6 {
	case 0:
		return 1
	case 1:
		return 2
	case 2:
		return 4
	}
	return 0
}

// readVarint decodes the header at the start of s (Section 2.1.2).
func readVarint(s []byte) (int, bool) {
	if len(s) == 0 {
		return 0, false
	}
	size := varintSize(s[0])
	if size == 0 || len(s) < size {
		return 0, false
	}
	v := uint32(s[0] & 0x3f)
	for _, c := range s[1:size] {
		v = v<<8 | uint32(c)
	}
	// Minimal encoding: a value that fits a shorter header is an error.
	switch size {
	case 2:
		if v < 1<<6 {
			return 0, false
		}
	case 4:
		if v < 1<<14 {
			return 0, false
		}
	}
	return int(v), true
}

// length reads a vector header and checks it against maxVectorLen and the
// bytes actually left.
func (p *parser) length(n *int) bool {
	if !p.varint(n) {
		return false
	}
	return *n <= maxVectorLen && *n <= len(p.s)
}

// vec reads an opaque<V> into a fresh copy.
func (p *parser) vec(out *[]byte) bool {
	var n int
	return p.length(&n) && p.raw(n, out)
}

// vecFunc reads a variable-length vector and runs f over its body; f must
// consume the body exactly.
func (p *parser) vecFunc(f func(*parser) bool) bool {
	var n int
	if !p.length(&n) {
		return false
	}
	body, _ := p.take(n)
	sub := newParser(body)
	return f(sub) && sub.empty()
}

// optional reads an optional<T> (Section 2.1.3). The presence byte must be
// 0 or 1.
func (p *parser) optional(f func(*parser) bool) (present bool, ok bool) {
	var flag uint8
	if !p.u8(&flag) {
		return false, false
	}
	switch flag {
	case 0:
		return false, true
	case 1:
		return true, f(p)
	}
	return false, false
}

// empty reports whether all input has been consumed.
func (p *parser) empty() bool { return len(p.s) == 0 }

// marshal returns the encoding of m.
func marshal(m interface{ marshal(*builder) }) []byte {
	var b builder
	m.marshal(&b)
	return b.bytes()
}

// unmarshal decodes data into m. Trailing bytes are an error.
func unmarshal(data []byte, m interface{ unmarshal(*parser) bool }) error {
	p := newParser(data)
	if !m.unmarshal(p) || !p.empty() {
		return errDecode
	}
	return nil
}

// vecList reads a vector of elements, calling elem until the body is used
// up. It is the decoding of T list<V> from Section 2.1.2.
func (p *parser) vecList(elem func(*parser) bool) bool {
	return p.vecFunc(func(s *parser) bool {
		for !s.empty() {
			before := len(s.s)
			if !elem(s) || len(s.s) == before {
				return false
			}
		}
		return true
	})
}

// marshalList appends the elements of xs as a T list<V> (Section 2.1.2).
func marshalList[T any, P interface {
	*T
	marshal(*builder)
}](b *builder, xs []T) {
	b.vecFunc(func(b *builder) {
		for i := range xs {
			P(&xs[i]).marshal(b)
		}
	})
}

// unmarshalList reads a T list<V> into out.
func unmarshalList[T any, P interface {
	*T
	unmarshal(*parser) bool
}](p *parser, out *[]T) bool {
	*out = nil
	return p.vecList(func(p *parser) bool {
		var v T
		if !P(&v).unmarshal(p) {
			return false
		}
		*out = append(*out, v)
		return true
	})
}

// marshalU16List appends a uint16 list<V>.
func marshalU16List[T ~uint16](b *builder, xs []T) {
	b.vecFunc(func(b *builder) {
		for _, x := range xs {
			b.u16(uint16(x))
		}
	})
}

// unmarshalU16List reads a uint16 list<V>.
func unmarshalU16List[T ~uint16](p *parser, out *[]T) bool {
	*out = nil
	return p.vecList(func(p *parser) bool {
		var v uint16
		if !p.u16(&v) {
			return false
		}
		*out = append(*out, T(v))
		return true
	})
}

// marshalOpaqueList appends an opaque<V> list<V>.
func marshalOpaqueList(b *builder, xs [][]byte) {
	b.vecFunc(func(b *builder) {
		for _, x := range xs {
			b.vec(x)
		}
	})
}

// unmarshalOpaqueList reads an opaque<V> list<V>.
func unmarshalOpaqueList(p *parser, out *[][]byte) bool {
	*out = nil
	return p.vecList(func(p *parser) bool {
		var v []byte
		if !p.vec(&v) {
			return false
		}
		*out = append(*out, v)
		return true
	})
}
