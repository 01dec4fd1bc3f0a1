package seat

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/padding"
)

const testChannel = "acme/tally/abc"

func testKey(t testing.TB) *SyncKey {
	t.Helper()
	p, err := ParsePhrase(testPhrase)
	if err != nil {
		t.Fatal(err)
	}
	return p.Seed().SyncKey()
}

func otherKey(t testing.TB) *SyncKey {
	t.Helper()
	p, err := NewPhrase(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Seed().SyncKey()
}

func testEntries(n int) []Entry {
	es := make([]Entry, n)
	base := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for i := range es {
		es[i] = NewEntry(fmt.Sprintf("entry %d: ünïcødé ✓", i), base.Add(time.Duration(i)*time.Second+time.Microsecond))
	}
	return es
}

func equalEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !a[i].CreatedAt.Equal(b[i].CreatedAt) || a[i].Text != b[i].Text {
			return false
		}
	}
	return true
}

// TestOpenVector opens a batch sealed independently (Python, pyca/cryptography
// AES-GCM) from the format description, under testPhrase's sync key.
func TestOpenVector(t *testing.T) {
	sealed, _ := hex.DecodeString("534b42316465666768696a6b6c6d6e6f2a9ecebda4435dd6bece94ef6dd0b5b3c24393633209d4b8ad4622d133f324d290f621d48695474f5ff87d924fc6caa9c5f15b2c7162cb226ca69158acc291998e6cd81e868e4c1a9c807009bab6c6e1addbd48748b479a7d4e7e1608962b4cf87371cb32ab5d239ebd7c9fccc39c01e535adbcd6704c5df91c74072db231054ccae651bf3e824876b7d6bd49afd24c4f7affa37198699a6a02f971794f2e635eb36c3d058e8ee1422e98ed17e2734359e7c7ed3c3b94ad4b4a2a96f5a7b711c7f4e3f6147b33b714bd594ef82df72b7ebc6803c954e8ec06dbca3164fbd9954873c9220eb77ee6dbe0a4a12e2762c22d2f3067a1ccfb61845eded17960e267e08228bcd39132e49df3c8007f0f419a9")
	b, err := testKey(t).Open(testChannel, sealed)
	if err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for i := range id {
		id[i] = byte(i)
	}
	want := []Entry{{ID: id, CreatedAt: time.UnixMicro(1700000000000000), Text: "hello"}}
	if b.Cover || !equalEntries(b.Entries, want) {
		t.Fatalf("opened %+v", b)
	}
}

func TestSealOpen(t *testing.T) {
	k := testKey(t)
	for _, n := range []int{0, 1, 2, 100, 3000} {
		es := testEntries(n)
		sealed, err := k.Seal(testChannel, es)
		if err != nil {
			t.Fatal(err)
		}
		if !padding.Valid(len(sealed) - Overhead) {
			t.Errorf("%d entries: sealed length %d is not Overhead + a block size", n, len(sealed))
		}
		b, err := k.Open(testChannel, sealed)
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if b.Cover || !equalEntries(b.Entries, es) {
			t.Fatalf("%d entries: round trip mismatch", n)
		}
	}
}

func TestSealEdgeEntries(t *testing.T) {
	k := testKey(t)
	es := []Entry{
		{Text: ""},
		{Text: strings.Repeat("x", MaxTextLen), CreatedAt: time.UnixMicro(-1 << 62)},
		{Text: "\x00 nul and emoji 🛰", CreatedAt: time.UnixMicro(1<<63 - 1)},
	}
	sealed, err := k.Seal(testChannel, es)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Open(testChannel, sealed)
	if err != nil || !equalEntries(b.Entries, es) {
		t.Fatalf("edge entries: %v", err)
	}
	for name, e := range map[string]Entry{
		"text too long": {Text: strings.Repeat("x", MaxTextLen+1)},
		"invalid utf-8": {Text: "\xff\xfe"},
	} {
		if _, err := k.Seal(testChannel, []Entry{e}); err == nil {
			t.Errorf("%s: sealed", name)
		}
	}
	if _, err := k.Seal("not a channel", nil); err == nil {
		t.Error("invalid channel name accepted")
	}
}

func TestMaxPadded(t *testing.T) {
	if !padding.Valid(maxPadded) || maxPadded+Overhead > MaxSealedLen {
		t.Fatalf("maxPadded %d does not fit", maxPadded)
	}
	if next := padding.Size(maxPadded - padding.HeaderLen + 1); next+Overhead <= MaxSealedLen {
		t.Fatalf("maxPadded %d is not the largest block that fits (next %d)", maxPadded, next)
	}
}

func TestSealIsRandomized(t *testing.T) {
	k := testKey(t)
	es := testEntries(3)
	a, _ := k.Seal(testChannel, es)
	b, _ := k.Seal(testChannel, es)
	if bytes.Equal(a, b) || bytes.Equal(a[4:16], b[4:16]) {
		t.Error("sealing twice gave the same nonce or bytes")
	}
}

func TestOpenRejects(t *testing.T) {
	k := testKey(t)
	sealed, err := k.Seal(testChannel, testEntries(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open("acme/tally/abd", sealed); !errors.Is(err, ErrOpen) {
		t.Errorf("wrong channel: %v", err)
	}
	if _, err := otherKey(t).Open(testChannel, sealed); !errors.Is(err, ErrOpen) {
		t.Errorf("wrong key: %v", err)
	}
	// Flip one bit at every position: magic gives ErrNotSealed, anything
	// else ErrOpen.
	for i := range sealed {
		mod := bytes.Clone(sealed)
		mod[i] ^= 0x10
		_, err := k.Open(testChannel, mod)
		want := ErrOpen
		if i < len(magic) {
			want = ErrNotSealed
		}
		if !errors.Is(err, want) {
			t.Fatalf("bit flipped at %d: %v, want %v", i, err, want)
		}
	}
	for n := 0; n < len(sealed); n++ {
		_, err := k.Open(testChannel, sealed[:n])
		if err == nil {
			t.Fatalf("truncated to %d bytes: opened", n)
		}
		if n >= len(magic) && !errors.Is(err, ErrOpen) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	if _, err := k.Open(testChannel, append(bytes.Clone(sealed), 0)); !errors.Is(err, ErrOpen) {
		t.Errorf("extended: %v", err)
	}
	big := append(bytes.Clone(magic[:]), make([]byte, MaxSealedLen)...)
	if _, err := k.Open(testChannel, big); !errors.Is(err, ErrOpen) {
		t.Errorf("oversized: %v", err)
	}
}

// TestMagicIsNotMLS checks the magic cannot be read as an MLSMessage, whose
// first field is the uint16 protocol version mls10 = 0x0001 (RFC 9420 §6).
func TestMagicIsNotMLS(t *testing.T) {
	if magic[0] == 0x00 && magic[1] == 0x01 {
		t.Fatal("magic starts with the MLS 1.0 version")
	}
	sealed, _ := testKey(t).Seal(testChannel, nil)
	if sealed[0] == 0x00 && sealed[1] == 0x01 {
		t.Fatal("a sealed batch starts with the MLS 1.0 version")
	}
	if _, err := testKey(t).Open(testChannel, []byte{0x00, 0x01, 0x00, 0x01, 0x00}); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("an MLS-looking message: %v", err)
	}
}

// TestCoverLooksReal checks what the relay sees: a cover batch and a real
// batch of the same block size have the same length and the same public
// prefix, and only the key holder can tell them apart.
func TestCoverLooksReal(t *testing.T) {
	k := testKey(t)
	for _, n := range []int{1, 10, 100, 1000, 5000} {
		real, err := k.Seal(testChannel, testEntries(n))
		if err != nil {
			t.Fatal(err)
		}
		size := len(real) - Overhead
		cov, err := k.SealCover(testChannel, size)
		if err != nil {
			t.Fatal(err)
		}
		if len(cov) != len(real) || !bytes.Equal(cov[:len(magic)], real[:len(magic)]) {
			t.Fatalf("block %d: cover %d bytes, real %d bytes", size, len(cov), len(real))
		}
		b, err := k.Open(testChannel, cov)
		if err != nil || !b.Cover || len(b.Entries) != 0 {
			t.Fatalf("block %d: cover opened to %+v, %v", size, b, err)
		}
		if _, err := otherKey(t).Open(testChannel, cov); !errors.Is(err, ErrOpen) {
			t.Fatalf("cover opened under another key: %v", err)
		}
	}
	for _, size := range padding.Buckets() {
		cov, err := k.SealCover(testChannel, size)
		if err != nil || len(cov) != size+Overhead {
			t.Fatalf("cover of block %d: %d bytes, %v", size, len(cov), err)
		}
	}
	for _, bad := range []int{0, 100, 300, 1 << 20} {
		if _, err := k.SealCover(testChannel, bad); err == nil {
			t.Errorf("cover of block %d accepted", bad)
		}
	}
}

func TestSealAllSplits(t *testing.T) {
	k := testKey(t)
	if out, err := k.SealAll(testChannel, nil); err != nil || len(out) != 0 {
		t.Fatalf("no entries: %d batches, %v", len(out), err)
	}
	// About 5 MiB of text: several batches, each within the relay limit.
	es := make([]Entry, 50)
	for i := range es {
		es[i] = NewEntry(strings.Repeat(string(rune('a'+i%26)), 100<<10+i), time.Now())
	}
	out, err := k.SealAll(testChannel, es)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 5 {
		t.Errorf("%d batches for 5 MiB", len(out))
	}
	var got []Entry
	for _, s := range out {
		if len(s) > MaxSealedLen {
			t.Fatalf("batch of %d bytes", len(s))
		}
		b, err := k.Open(testChannel, s)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Entries...)
	}
	if !equalEntries(got, es) {
		t.Fatal("entries lost or reordered across batches")
	}
	// One batch that is exactly too large fails with ErrTooLarge in Seal.
	if _, err := k.Seal(testChannel, es); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("5 MiB in one batch: %v", err)
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	good, _ := encodeBatch(testEntries(2))
	cases := map[string][]byte{
		"empty":          {},
		"unknown kind":   {2},
		"no count":       {0, 0, 0},
		"count too big":  {0, 0xff, 0xff, 0xff, 0xff},
		"truncated":      good[:len(good)-1],
		"trailing":       append(bytes.Clone(good), 0),
		"cover not zero": {1, 0, 1},
		"bad utf-8": func() []byte {
			b, _ := encodeBatch([]Entry{{Text: "ab"}})
			b[len(b)-1] = 0xff
			return b
		}(),
		"text too long": func() []byte {
			b, _ := encodeBatch([]Entry{{Text: "ab"}})
			b[len(b)-2-4] = 0x7f // text length high byte
			return b
		}(),
	}
	for name, b := range cases {
		if _, err := decodeBatch(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if b, err := decodeBatch([]byte{1}); err != nil || !b.Cover {
		t.Errorf("minimal cover: %+v, %v", b, err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		b, _ := encodeBatch(testEntries(n))
		f.Add(b)
	}
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := decodeBatch(b)
		if err != nil || batch.Cover {
			return
		}
		again, err := encodeBatch(batch.Entries)
		if err != nil {
			t.Fatalf("decoded batch does not re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode/encode is not the identity")
		}
	})
}

// sealFixedNonce seals like SyncKey.Seal under testPhrase's sync key, but
// with a chosen nonce, so fuzz seeds are the same in every fuzzing process.
func sealFixedNonce(t testing.TB, plain []byte, nonce byte) []byte {
	t.Helper()
	p, _ := ParsePhrase(testPhrase)
	block, err := aes.NewCipher(p.Seed().derive(labelSyncKey, 32))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Repeat([]byte{nonce}, nonceLen)
	out := append(append([]byte(nil), magic[:]...), n...)
	return gcm.Seal(out, n, padding.Pad(plain), associatedData(magic[:], testChannel))
}

// FuzzOpen feeds arbitrary bytes to Open, which must never panic and must
// refuse everything but genuine sealed batches.
func FuzzOpen(f *testing.F) {
	k := testKey(f)
	genuine := map[string]bool{}
	for i, n := range []int{0, 1, 20} {
		e := testEntries(n)
		for j := range e {
			e[j].ID = [16]byte{byte(j)}
		}
		plain, _ := encodeBatch(e)
		s := sealFixedNonce(f, plain, byte(i))
		genuine[string(s)] = true
		f.Add(s)
	}
	cov := make([]byte, 512-padding.HeaderLen)
	cov[0] = kindCover
	c := sealFixedNonce(f, cov, 9)
	genuine[string(c)] = true
	f.Add(c)
	f.Add([]byte("SKB1"))
	f.Add([]byte{0, 1, 0, 1})
	for s := range genuine {
		if _, err := k.Open(testChannel, []byte(s)); err != nil {
			f.Fatalf("fixed-nonce seed does not open: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := k.Open(testChannel, b)
		if err == nil && !genuine[string(b)] {
			t.Fatalf("Open accepted %d bytes nobody sealed", len(b))
		}
	})
}

// FuzzOpenPlaintext seals arbitrary plaintexts, padded or not, so the fuzzer
// reaches the padding and batch decoders behind the authentication.
func FuzzOpenPlaintext(f *testing.F) {
	k := testKey(f)
	b, _ := encodeBatch(testEntries(2))
	f.Add(b, true)
	f.Add(padding.Pad(b), false)
	f.Add([]byte{1, 0}, true)
	f.Fuzz(func(t *testing.T, plain []byte, pad bool) {
		if len(plain) > 64<<10 {
			return
		}
		var sealed []byte
		if pad {
			s, err := k.seal(testChannel, plain)
			if err != nil {
				return
			}
			sealed = s
		} else {
			// An unpadded block: Open must refuse it unless it happens
			// to be well-formed padding.
			out := append([]byte(nil), magic[:]...)
			sealed = k.aead.Seal(out, nil, plain, associatedData(magic[:], testChannel))
		}
		batch, err := k.Open(testChannel, sealed)
		if err != nil || batch.Cover {
			return
		}
		again, err := encodeBatch(batch.Entries)
		if err != nil {
			t.Fatal(err)
		}
		if pad && !bytes.Equal(again, plain) {
			t.Fatal("opened batch does not re-encode to the sealed plaintext")
		}
	})
}

func BenchmarkSeal100(b *testing.B) {
	k := testKey(b)
	es := testEntries(100)
	sealed, _ := k.Seal(testChannel, es)
	b.SetBytes(int64(len(sealed)))
	for b.Loop() {
		if _, err := k.Seal(testChannel, es); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen100(b *testing.B) {
	k := testKey(b)
	sealed, _ := k.Seal(testChannel, testEntries(100))
	b.SetBytes(int64(len(sealed)))
	for b.Loop() {
		if _, err := k.Open(testChannel, sealed); err != nil {
			b.Fatal(err)
		}
	}
}
