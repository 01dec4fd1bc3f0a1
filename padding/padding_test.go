package padding

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// padmeRef is an independent, float-free restatement of the paper's
// definition, used to check [Padme].
func padmeRef(l int) int {
	e := 0
	for 1<<(e+1) <= l {
		e++
	}
	s := 0
	for 1<<(s+1) <= e {
		s++
	}
	s++
	z := e - s
	step := 1 << z
	return (l + step - 1) / step * step
}

func TestPadmeKnownValues(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{32769, 34816}, // E=15, S=4: clear 11 bits
		{34816, 34816},
		{34817, 36864},
		{65536, 65536},
		{65537, 67584}, // E=16, S=5: clear 11 bits
		{1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<15}, // E=20, S=5: clear 15 bits
	} {
		if got := Padme(tc.in); got != tc.want {
			t.Errorf("Padme(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestPadmeProperties(t *testing.T) {
	for l := 2; l < 1<<21; l += 1 + l/4096 {
		p := Padme(l)
		if p != padmeRef(l) {
			t.Fatalf("Padme(%d) = %d, reference %d", l, p, padmeRef(l))
		}
		if p < l || Padme(p) != p {
			t.Fatalf("Padme(%d) = %d is not a fixed point at or above l", l, p)
		}
		if float64(p-l) > 0.12*float64(l) {
			t.Fatalf("Padme(%d) = %d: overhead above 12%%", l, p)
		}
	}
}

func TestSizes(t *testing.T) {
	want := map[int]int{0: 256, 252: 256, 253: 512, 508: 512, 509: 1024, 32764: 32768, 32765: 34816}
	for n, w := range want {
		if got := Size(n); got != w {
			t.Errorf("Size(%d) = %d, want %d", n, got, w)
		}
	}
	if got := Buckets(); len(got) != 8 || got[0] != 256 || got[7] != MaxBucket {
		t.Errorf("Buckets() = %v", got)
	}
}

// TestRoundTripAll pads every payload length from 0 to 100 KiB (a sample and
// every size edge with -short) and checks the block size is exactly a bucket (up to 32 KiB) or the Padmé value above.
func TestRoundTripAll(t *testing.T) {
	const max = 100 << 10
	src := make([]byte, max)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	bucketSet := map[int]bool{}
	for _, b := range Buckets() {
		bucketSet[b] = true
	}
	seen := map[int]bool{}
	for n := 0; n <= max; n++ {
		if testing.Short() && n%17 != 0 && Size(n) == Size(n+1) && (n == 0 || Size(n-1) == Size(n)) {
			continue // in -short mode: every 17th length and every size edge
		}
		p := src[:n]
		b := Pad(p)
		need := n + HeaderLen
		switch {
		case need <= MaxBucket:
			if !bucketSet[len(b)] {
				t.Fatalf("len %d: block %d is not a bucket", n, len(b))
			}
			// the smallest bucket that fits
			if len(b)/2 >= need && len(b) > 256 {
				t.Fatalf("len %d: block %d is not the smallest bucket", n, len(b))
			}
		default:
			if len(b) != Padme(need) {
				t.Fatalf("len %d: block %d, want Padmé %d", n, len(b), Padme(need))
			}
		}
		if len(b) != Size(n) || !Valid(len(b)) {
			t.Fatalf("len %d: block %d, Size %d, Valid %v", n, len(b), Size(n), Valid(len(b)))
		}
		got, err := Unpad(b)
		if err != nil {
			t.Fatalf("len %d: %v", n, err)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("len %d: round trip mismatch", n)
		}
		seen[len(b)] = true
	}
	// 8 buckets plus the Padmé steps between 32 KiB and 100 KiB: few sizes.
	if len(seen) > 50 {
		t.Errorf("%d distinct sizes for 0..100 KiB, want a small set", len(seen))
	}
}

func TestValid(t *testing.T) {
	for _, s := range []int{256, 512, 1024, 32768, 34816, 1 << 20} {
		if !Valid(s) {
			t.Errorf("Valid(%d) = false", s)
		}
	}
	for _, s := range []int{-1, 0, 4, 255, 257, 300, 32767, 32769, 34815, 1<<20 + 1, 1 << 31} {
		if Valid(s) {
			t.Errorf("Valid(%d) = true", s)
		}
	}
}

func TestUnpadRejects(t *testing.T) {
	good := Pad([]byte("hello"))
	mut := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	cases := map[string][]byte{
		"empty":         {},
		"short":         {0, 0, 1},
		"length beyond": mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b, 253); return b }),
		"huge length":   mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b, 0xffffffff); return b }),
		"nonzero pad":   mut(func(b []byte) []byte { b[len(b)-1] = 1; return b }),
		"nonzero first": mut(func(b []byte) []byte { b[HeaderLen+5] = 0x80; return b }),
		"truncated":     good[:255],
		"extended":      append(append([]byte(nil), good...), 0),
		"not a bucket":  make([]byte, 300),
		// a 5-byte payload must sit in 256 bytes, not a larger bucket
		"oversized": append(append([]byte(nil), good...), make([]byte, 256)...),
		"padme off": func() []byte {
			b := make([]byte, 34816+1)
			binary.BigEndian.PutUint32(b, 34000)
			return b
		}(),
	}
	for name, b := range cases {
		if _, err := Unpad(b); err == nil {
			t.Errorf("%s: Unpad accepted %d bytes", name, len(b))
		}
	}
}

func TestUnpadRejectsEveryPaddingByte(t *testing.T) {
	for _, n := range []int{0, 5, 251, 1000, 40000} {
		good := Pad(make([]byte, n))
		for i := HeaderLen + n; i < len(good); i++ {
			good[i] = 1
			if _, err := Unpad(good); err == nil {
				t.Fatalf("payload %d: nonzero padding at %d accepted", n, i)
			}
			good[i] = 0
		}
	}
}

func TestPadPanicsOnMisuse(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Size(-1) did not panic")
		}
	}()
	Size(-1)
}

func FuzzUnpad(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Add(Pad(nil))
	f.Add(Pad([]byte("cover")))
	f.Add(Pad(bytes.Repeat([]byte{7}, 300)))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Unpad(b)
		if err != nil {
			return
		}
		// Anything Unpad accepts is exactly what Pad makes of it.
		if again := Pad(p); !bytes.Equal(again, b) {
			t.Fatalf("Unpad accepted a non-canonical block of %d bytes", len(b))
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("hello"))
	f.Add(bytes.Repeat([]byte{0}, 252))
	f.Add(bytes.Repeat([]byte{0xff}, 253))
	f.Fuzz(func(t *testing.T, p []byte) {
		b := Pad(p)
		if !Valid(len(b)) || len(b) != Size(len(p)) {
			t.Fatalf("Pad(%d bytes) gave %d bytes", len(p), len(b))
		}
		got, err := Unpad(b)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("Unpad(Pad(x)) != x: %v", err)
		}
	})
}

var sink []byte

func benchPad(b *testing.B, n int) {
	p := make([]byte, n)
	b.SetBytes(int64(n))
	for b.Loop() {
		sink = Pad(p)
	}
}

func benchUnpad(b *testing.B, n int) {
	blk := Pad(make([]byte, n))
	b.SetBytes(int64(n))
	for b.Loop() {
		var err error
		sink, err = Unpad(blk)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPad1KiB(b *testing.B)   { benchPad(b, 1<<10) }
func BenchmarkPad1MiB(b *testing.B)   { benchPad(b, 1<<20) }
func BenchmarkUnpad1KiB(b *testing.B) { benchUnpad(b, 1<<10) }
func BenchmarkUnpad1MiB(b *testing.B) { benchUnpad(b, 1<<20) }
