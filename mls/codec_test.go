package mls

import (
	"bytes"
	"testing"
)

func TestVarintRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 16383, 16384, 1<<30 - 1} {
		var b builder
		b.varint(n)
		got, ok := readVarint(b.bytes())
		if !ok || got != n || varintSize(b.bytes()[0]) != len(b.bytes()) {
			t.Errorf("varint %d: encoded %x, decoded %d %v", n, b.bytes(), got, ok)
		}
	}
}

func TestVarintRejects(t *testing.T) {
	for _, in := range [][]byte{
		{},                          // empty
		{0x40},                      // short
		{0x40, 0x3f},                // 63 in two bytes: not minimal
		{0x80, 0x00, 0x3f, 0xff},    // 16383 in four bytes: not minimal
		{0xc0, 0, 0, 0, 0, 0, 0, 1}, // reserved prefix
	} {
		if n, ok := readVarint(in); ok {
			t.Errorf("readVarint(%x) = %d, want error", in, n)
		}
	}
}

func TestParserVec(t *testing.T) {
	var b builder
	b.vec([]byte("hello"))
	b.optional(true, func(b *builder) { b.u16(7) })
	b.optional(false, nil)
	b.vecFunc(func(b *builder) { b.u32(1); b.u32(2) })
	b.u64(9)
	data := b.bytes()

	p := newParser(data)
	var s []byte
	var v16 uint16
	var v64 uint64
	var list []uint32
	if !p.vec(&s) || string(s) != "hello" {
		t.Fatal("vec")
	}
	if present, ok := p.optional(func(p *parser) bool { return p.u16(&v16) }); !present || !ok || v16 != 7 {
		t.Fatal("optional present")
	}
	if present, ok := p.optional(nil); present || !ok {
		t.Fatal("optional absent")
	}
	if !p.vecList(func(p *parser) bool {
		var x uint32
		list = append(list, x)
		return p.u32(&list[len(list)-1])
	}) || len(list) != 2 || list[1] != 2 {
		t.Fatal("vecList")
	}
	if !p.u64(&v64) || v64 != 9 || !p.empty() {
		t.Fatal("u64")
	}

	// The decoded vector is a copy.
	s[0] = 'x'
	if !bytes.Contains(data, []byte("hello")) {
		t.Error("vec aliases its input")
	}
}

func TestParserRejects(t *testing.T) {
	// A length beyond the input.
	if p := newParser([]byte{0x05, 'a'}); p.vec(new([]byte)) {
		t.Error("short vector accepted")
	}
	// Optional flag other than 0 or 1.
	if _, ok := newParser([]byte{2}).optional(func(*parser) bool { return true }); ok {
		t.Error("optional flag 2 accepted")
	}
	// A nested body that is not fully consumed.
	if newParser([]byte{0x02, 0x01, 0x02}).vecFunc(func(p *parser) bool {
		var v uint8
		return p.u8(&v)
	}) {
		t.Error("unconsumed vector body accepted")
	}
	// A length over maxVectorLen, even with the data present, is refused.
	var b builder
	b.varint(maxVectorLen + 1)
	if newParser(append(b.bytes(), make([]byte, maxVectorLen+1)...)).vec(new([]byte)) {
		t.Error("oversized vector accepted")
	}
}
