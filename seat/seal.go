package seat

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/padding"
)

// A sealed batch is
//
//	magic "SKB1" (4) | nonce (12) | AES-256-GCM ciphertext of the padded batch | tag (16)
//
// with associated data magic | channel name. The magic comes first so that a
// sealed batch can never parse as an MLS message: every MLSMessage (RFC 9420
// §6) starts with its uint16 protocol version, and mls10 is 0x0001, while a
// sealed batch starts with 0x53 0x4b ("SK"). The relay, which classifies
// entries by that header, files sealed batches as plain application data.
// The digit is the format version; a new format takes a new magic. Binding
// the magic into the associated data ties the ciphertext to this format, and
// binding the channel name stops a batch from being replayed into another
// channel under the same key.
//
// The nonce is random. With 96-bit random nonces the chance of a repeat stays
// below 2^-32 for the first 2^32 batches sealed under one key, far more than
// one seat pushes; the key is shared by the seat's devices, so a counter
// would need coordination that random nonces do not.
var magic = [4]byte{'S', 'K', 'B', '1'}

// A batch sealed under a later key epoch (synckeys.go) names its epoch:
//
//	magic "SKB2" (4) | epoch (uint32) | nonce (12) | ciphertext | tag (16)
//
// with associated data magic | epoch | channel name. A batch with the
// magic "SKB1" is epoch 0, the key every phrase derives.
var magicEpoch = [4]byte{'S', 'K', 'B', '2'}

// epochOverhead is what a batch of an epoch above 0 adds beyond Overhead.
const epochOverhead = 4

const (
	nonceLen = 12
	tagLen   = 16

	// Overhead is the number of bytes a sealed batch adds to its padded
	// plaintext: magic, nonce and tag. A sealed batch is always
	// Overhead plus a padding block size long.
	Overhead = len(magic) + nonceLen + tagLen

	// MaxSealedLen is the largest sealed batch: the relay's payload limit.
	MaxSealedLen = 1 << 20

	// MaxTextLen is the longest entry text, in bytes. Any single entry fits
	// in one batch.
	MaxTextLen = 256 << 10
)

// The batch encoding, inside the padding:
//
//	kind (1): 0 for entries, 1 for cover
//	kind 0:   count (uint32) | count × entry
//	entry:    id (16) | created_at (int64, Unix microseconds) | text length (uint32) | text (UTF-8)
//	kind 1:   zero bytes up to the block size
//
// All integers are big-endian. Decoding is strict: unknown kinds, counts
// beyond what the bytes can hold, text over MaxTextLen or not UTF-8, and
// trailing bytes are refused, so every accepted batch re-encodes to the same
// bytes.
const (
	kindEntries = 0
	kindCover   = 1

	entryFixedLen = 16 + 8 + 4
)

// maxPadded is the largest padding block that fits in MaxSealedLen.
var maxPadded = func() int {
	n := MaxSealedLen - Overhead - padding.HeaderLen
	for padding.Size(n)+Overhead > MaxSealedLen {
		n--
	}
	return padding.Size(n)
}()

var (
	errMalformed = errors.New("seat: malformed batch")
)

// An Entry is one record of a seat's log.
type Entry struct {
	// ID is random and names the entry across devices, so merging a batch
	// twice, or from two devices, adds it once.
	ID [16]byte
	// CreatedAt is stored with microsecond precision, in UTC.
	CreatedAt time.Time
	// Text is UTF-8, at most MaxTextLen bytes.
	Text string
}

// NewEntry returns an entry with a fresh random ID.
func NewEntry(text string, createdAt time.Time) Entry {
	e := Entry{CreatedAt: createdAt.UTC().Truncate(time.Microsecond), Text: text}
	rand.Read(e.ID[:])
	return e
}

// A Batch is what a sealed batch opens to.
type Batch struct {
	// Cover is set for cover traffic; Entries is then empty and the batch
	// should be dropped.
	Cover   bool
	Entries []Entry
}

// A SyncKey seals and opens a seat's sync batches. It is safe for concurrent
// use.
type SyncKey struct {
	_     [0]func()
	aead  cipher.AEAD // AES-256-GCM with random nonces
	epoch uint32      // the key epoch (synckeys.go); 0 is the phrase's key
}

// Epoch is the key epoch the key seals under.
func (k *SyncKey) Epoch() uint32 { return k.epoch }

// header is what a batch sealed under k starts with.
func (k *SyncKey) header() []byte {
	if k.epoch == 0 {
		return magic[:]
	}
	return binary.BigEndian.AppendUint32(append([]byte(nil), magicEpoch[:]...), k.epoch)
}

// maxBlock is the largest padding block of a batch sealed under k.
func (k *SyncKey) maxBlock() int {
	if k.epoch == 0 {
		return maxPadded
	}
	return maxPaddedEpoch
}

// maxPaddedEpoch is maxPadded for a batch that names its epoch.
var maxPaddedEpoch = func() int {
	n := MaxSealedLen - Overhead - epochOverhead - padding.HeaderLen
	for padding.Size(n)+Overhead+epochOverhead > MaxSealedLen {
		n--
	}
	return n
}()

// BatchEpoch reads the key epoch a sealed batch names, without opening
// it: 0 for the first format.
func BatchEpoch(sealed []byte) (uint32, error) {
	switch {
	case len(sealed) >= len(magic) && bytes.Equal(sealed[:len(magic)], magic[:]):
		return 0, nil
	case len(sealed) >= len(magicEpoch)+epochOverhead && bytes.Equal(sealed[:len(magicEpoch)], magicEpoch[:]):
		return binary.BigEndian.Uint32(sealed[4:8]), nil
	}
	return 0, ErrNotSealed
}

func newSyncKey(key []byte) (*SyncKey, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &SyncKey{aead: aead}, nil
}

func associatedData(header []byte, ch string) []byte {
	ad := make([]byte, 0, len(header)+len(ch))
	ad = append(ad, header...)
	return append(ad, ch...)
}

// seal pads plain and seals it for ch.
func (k *SyncKey) seal(ch string, plain []byte) ([]byte, error) {
	if err := channel.Valid(ch); err != nil {
		return nil, fmt.Errorf("seat: %w", err)
	}
	if len(plain) > k.maxBlock()-padding.HeaderLen {
		return nil, ErrTooLarge
	}
	block := padding.Pad(plain)
	h := k.header()
	out := make([]byte, len(h), len(h)+nonceLen+tagLen+len(block))
	copy(out, h)
	// With NewGCMWithRandomNonce, Seal draws the nonce from crypto/rand and
	// writes nonce | ciphertext | tag.
	return k.aead.Seal(out, nil, block, associatedData(h, ch)), nil
}

// Seal encodes entries into one padded batch and seals it for channel ch.
// It returns [ErrTooLarge] if they do not fit in [MaxSealedLen].
func (k *SyncKey) Seal(ch string, entries []Entry) ([]byte, error) {
	enc, err := encodeBatch(entries)
	if err != nil {
		return nil, err
	}
	return k.seal(ch, enc)
}

// SealAll seals entries, in order, into as few batches as fit in
// [MaxSealedLen] each.
func (k *SyncKey) SealAll(ch string, entries []Entry) ([][]byte, error) {
	var out [][]byte
	limit := k.maxBlock() - padding.HeaderLen
	start, size := 0, 1+4
	for i, e := range entries {
		n := entryFixedLen + len(e.Text)
		if size+n > limit && i > start {
			b, err := k.Seal(ch, entries[start:i])
			if err != nil {
				return nil, err
			}
			out = append(out, b)
			start, size = i, 1+4
		}
		size += n
	}
	if start < len(entries) {
		b, err := k.Seal(ch, entries[start:])
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// SealCover returns a sealed cover batch whose padding block is size bytes,
// a block size from the padding package (as the cover scheduler supplies).
// It is [Overhead]+size bytes long, exactly like a real batch of that block
// size, and opens to a [Batch] with Cover set.
func (k *SyncKey) SealCover(ch string, size int) ([]byte, error) {
	if !padding.Valid(size) {
		return nil, fmt.Errorf("seat: cover size %d is not a padding block size", size)
	}
	if size > k.maxBlock() {
		return nil, ErrTooLarge
	}
	// The largest payload of a block is size-HeaderLen (block sizes are
	// fixed points of padding.Size), so this pads to exactly size.
	plain := make([]byte, size-padding.HeaderLen)
	plain[0] = kindCover
	return k.seal(ch, plain)
}

// Open authenticates and decodes a sealed batch received on channel ch.
func (k *SyncKey) Open(ch string, sealed []byte) (Batch, error) {
	epoch, err := BatchEpoch(sealed)
	if err != nil {
		return Batch{}, ErrNotSealed
	}
	h := k.header()
	if epoch != k.epoch || len(sealed) > MaxSealedLen || len(sealed) < len(h)+nonceLen+tagLen {
		return Batch{}, ErrOpen
	}
	block, err := k.aead.Open(nil, nil, sealed[len(h):], associatedData(h, ch))
	if err != nil {
		return Batch{}, ErrOpen
	}
	// Padding and batch are parsed only after authentication, so their
	// errors reveal nothing to anyone without the key (no padding oracle).
	plain, err := padding.Unpad(block)
	if err != nil {
		return Batch{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return decodeBatch(plain)
}

func encodeBatch(entries []Entry) ([]byte, error) {
	n := 1 + 4
	for _, e := range entries {
		if len(e.Text) > MaxTextLen {
			return nil, fmt.Errorf("seat: entry text longer than %d bytes", MaxTextLen)
		}
		if !utf8.ValidString(e.Text) {
			return nil, errors.New("seat: entry text is not valid UTF-8")
		}
		n += entryFixedLen + len(e.Text)
	}
	if n > maxPadded-padding.HeaderLen {
		return nil, ErrTooLarge
	}
	b := make([]byte, 0, n)
	b = append(b, kindEntries)
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = append(b, e.ID[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(e.CreatedAt.UnixMicro()))
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.Text)))
		b = append(b, e.Text...)
	}
	return b, nil
}

func decodeBatch(b []byte) (Batch, error) {
	if len(b) < 1 {
		return Batch{}, fmt.Errorf("%w: empty", errMalformed)
	}
	switch b[0] {
	case kindCover:
		for _, c := range b[1:] {
			if c != 0 {
				return Batch{}, fmt.Errorf("%w: cover filler is not zero", errMalformed)
			}
		}
		return Batch{Cover: true}, nil
	case kindEntries:
	default:
		return Batch{}, fmt.Errorf("%w: unknown kind %d", errMalformed, b[0])
	}
	b = b[1:]
	if len(b) < 4 {
		return Batch{}, fmt.Errorf("%w: truncated count", errMalformed)
	}
	count := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(count) > uint64(len(b)/entryFixedLen) {
		return Batch{}, fmt.Errorf("%w: %d entries cannot fit in %d bytes", errMalformed, count, len(b))
	}
	entries := make([]Entry, count)
	for i := range entries {
		if len(b) < entryFixedLen {
			return Batch{}, fmt.Errorf("%w: truncated entry", errMalformed)
		}
		e := &entries[i]
		copy(e.ID[:], b)
		e.CreatedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(b[16:]))).UTC()
		n := binary.BigEndian.Uint32(b[24:])
		b = b[entryFixedLen:]
		if n > MaxTextLen || uint64(n) > uint64(len(b)) {
			return Batch{}, fmt.Errorf("%w: bad text length %d", errMalformed, n)
		}
		text := b[:n]
		if !utf8.Valid(text) {
			return Batch{}, fmt.Errorf("%w: text is not valid UTF-8", errMalformed)
		}
		e.Text = string(text)
		b = b[n:]
	}
	if len(b) != 0 {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes", errMalformed, len(b))
	}
	return Batch{Entries: entries}, nil
}
