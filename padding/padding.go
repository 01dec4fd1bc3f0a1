// Package padding hides the length of a message behind a small set of sizes.
//
// Every send path pads its plaintext before encryption, so that the relay sees
// quantized sizes instead of real ones. [Pad] frames a payload and fills it up
// to the next allowed size; [Unpad] reverses it and refuses anything that
// [Pad] could not have produced.
//
// # Sizes
//
// A padded block is one of eight buckets, 256, 512, 1024, 2048, 4096, 8192,
// 16384 or 32768 bytes. Blocks larger than 32 KiB use Padmé (see [Padme]),
// which rounds up to a value whose binary representation keeps only about
// log2(log2(L))+1 significant bits. Its overhead is at most 12% and shrinks as
// payloads grow, while the number of distinct sizes an observer can see stays
// logarithmic in the payload length.
//
// # Framing
//
// A block is a 4-byte big-endian payload length, the payload, then zero bytes
// up to the block size:
//
//	| len (uint32 BE) | payload (len bytes) | 0x00 ... 0x00 |
//
// A length prefix, unlike a terminator such as ISO/IEC 7816-4's 0x80 byte,
// lets the decoder find the payload end without scanning, works for payloads
// that end in any byte, and makes every check strict: the block size must be
// exactly [Size] of the declared length and every padding byte must be zero.
// So each payload has exactly one padded form, and a block that was tampered
// with or produced by another encoder is refused instead of being read in some
// lenient way.
package padding

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// buckets are the fixed block sizes, smallest first.
var buckets = [...]int{256, 512, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10}

// Buckets returns the eight fixed block sizes, smallest first.
func Buckets() []int { return append([]int(nil), buckets[:]...) }

// MaxBucket is the largest fixed bucket; bigger blocks are sized with Padmé.
const MaxBucket = 32 << 10

// HeaderLen is the size of the length prefix inside every block.
const HeaderLen = 4

// MaxPayload is the largest payload [Pad] accepts. It keeps every block size
// well inside an int and the length prefix inside a uint32.
const MaxPayload = 1<<30 - HeaderLen

var (
	errShort   = errors.New("padding: block shorter than its length prefix")
	errLength  = errors.New("padding: declared length exceeds the block")
	errSize    = errors.New("padding: block size does not match the declared length")
	errNonzero = errors.New("padding: nonzero padding byte")
)

// Size returns the length of the block [Pad] produces for an n-byte payload.
// It panics if n is negative or larger than [MaxPayload].
func Size(n int) int {
	if n < 0 || n > MaxPayload {
		panic("padding: payload length out of range")
	}
	need := n + HeaderLen
	for _, b := range buckets {
		if need <= b {
			return b
		}
	}
	return Padme(need)
}

// Padme rounds l up with the Padmé function of Nikitin, Barman, Lueks,
// Underwood, Hubaux and Ford, "Reducing Metadata Leakage from Encrypted Files
// and Communication with PURBs", Proceedings on Privacy Enhancing Technologies
// 2019(4), section 4.2:
//
//	E = floor(log2 L)
//	S = floor(log2 E) + 1
//	z = E - S                  (low bits that are cleared)
//	Padme(L) = (L + 2^z - 1) &^ (2^z - 1)
//
// It returns l unchanged for l < 2. Padmé values are fixed points:
// Padme(Padme(l)) == Padme(l).
func Padme(l int) int {
	if l < 2 {
		return l
	}
	e := bits.Len(uint(l)) - 1
	s := bits.Len(uint(e))
	z := e - s
	mask := 1<<z - 1
	return (l + mask) &^ mask
}

// Valid reports whether size is a block size [Pad] can produce.
func Valid(size int) bool {
	if size <= MaxBucket {
		for _, b := range buckets {
			if size == b {
				return true
			}
		}
		return false
	}
	return size <= Size(MaxPayload) && Padme(size) == size
}

// Pad returns p framed and padded to [Size](len(p)) bytes. It panics if p is
// longer than [MaxPayload].
func Pad(p []byte) []byte {
	out := make([]byte, Size(len(p)))
	binary.BigEndian.PutUint32(out, uint32(len(p)))
	copy(out[HeaderLen:], p)
	return out
}

// Unpad returns the payload of a block made by [Pad]. The result aliases b.
// It refuses a block whose declared length does not fit, whose size is not
// exactly the size [Pad] gives that length, or whose padding is not all zero.
func Unpad(b []byte) ([]byte, error) {
	if len(b) < HeaderLen {
		return nil, errShort
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-HeaderLen) {
		return nil, errLength
	}
	// n ≤ len(b)-4 and slices are bounded by the address space, so the
	// declared length is representable; it may still exceed MaxPayload.
	if int(n) > MaxPayload || Size(int(n)) != len(b) {
		return nil, errSize
	}
	if !allZero(b[HeaderLen+int(n):]) {
		return nil, errNonzero
	}
	return b[HeaderLen : HeaderLen+int(n) : HeaderLen+int(n)], nil
}

// allZero reports whether every byte of b is zero, reading eight at a time.
func allZero(b []byte) bool {
	var acc uint64
	for len(b) >= 8 {
		acc |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, c := range b {
		acc |= uint64(c)
	}
	return acc == 0
}
