package seat

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tyler-smith/go-bip39"
)

// Derivation labels, one per purpose. Each is the HKDF-SHA256 info string for
// one key; a new purpose gets a new label, and a changed derivation a new
// version suffix, so keys of different purposes or versions never coincide.
const (
	labelSyncKey  = "skytale seat sync key v1"
	labelIdentity = "skytale seat identity v1"
	labelLocalKey = "skytale seat local store v1"
)

// PhraseWords is the number of words in a recovery phrase (256 bits of
// entropy plus an 8-bit checksum, 11 bits per word).
const PhraseWords = 24

// maxPhraseInput bounds what ParsePhrase reads: 24 words of at most 8
// letters leave plenty of room for any spacing a person types.
const maxPhraseInput = 4096

const redacted = "REDACTED"

var (
	errPhraseLen      = fmt.Errorf("seat: a recovery phrase has %d words", PhraseWords)
	errPhraseChecksum = errors.New("seat: recovery phrase checksum does not match: check the words and their order")
)

// A Phrase is a 24-word BIP-39 recovery phrase. It never prints its words;
// see [Phrase.Words].
type Phrase struct {
	_     [0]func() // not comparable: == on secrets is not constant time
	words string    // lowercase, single spaces
}

// NewPhrase returns a phrase made from 256 bits of entropy read from r, or
// from crypto/rand when r is nil.
func NewPhrase(r io.Reader) (*Phrase, error) {
	var entropy [32]byte
	if r == nil {
		rand.Read(entropy[:])
	} else if _, err := io.ReadFull(r, entropy[:]); err != nil {
		return nil, fmt.Errorf("seat: reading entropy: %w", err)
	}
	words, err := bip39.NewMnemonic(entropy[:])
	clear(entropy[:])
	if err != nil {
		return nil, fmt.Errorf("seat: internal error: %v", err)
	}
	return &Phrase{words: words}, nil
}

// ParsePhrase checks and normalizes a phrase typed by a person: any spacing
// and letter case, exactly 24 words from the BIP-39 English list, valid
// checksum. Its errors never include the words.
func ParsePhrase(s string) (*Phrase, error) {
	if len(s) > maxPhraseInput {
		return nil, fmt.Errorf("seat: recovery phrase input longer than %d bytes", maxPhraseInput)
	}
	fields := strings.Fields(strings.ToLower(s))
	if len(fields) != PhraseWords {
		return nil, fmt.Errorf("%w, got %d", errPhraseLen, len(fields))
	}
	for i, w := range fields {
		if _, ok := bip39.GetWordIndex(w); !ok {
			return nil, fmt.Errorf("seat: word %d of the recovery phrase is not a BIP-39 English word", i+1)
		}
	}
	words := strings.Join(fields, " ")
	if _, err := bip39.EntropyFromMnemonic(words); err != nil {
		return nil, errPhraseChecksum
	}
	return &Phrase{words: words}, nil
}

// Words reveals the phrase. It is meant for the backup ceremony and for
// storing the phrase in the home folder, nothing else.
func (p *Phrase) Words() []string { return strings.Fields(p.words) }

// Seed returns the BIP-39 seed of the phrase, with an empty passphrase
// (PBKDF2-HMAC-SHA512, 2048 iterations, salt "mnemonic").
func (p *Phrase) Seed() *Seed {
	s := &Seed{}
	b := bip39.NewSeed(p.words, "")
	copy(s.b[:], b)
	clear(b)
	return s
}

// The secret-holding types format as REDACTED under every verb. The methods
// have value receivers so that printing a dereferenced value is covered too.

func (Phrase) String() string                     { return "seat.Phrase(" + redacted + ")" }
func (p Phrase) GoString() string                 { return p.String() }
func (p Phrase) Format(f fmt.State, verb rune)    { io.WriteString(f, p.String()) }
func (Seed) String() string                       { return "seat.Seed(" + redacted + ")" }
func (s Seed) GoString() string                   { return s.String() }
func (s Seed) Format(f fmt.State, verb rune)      { io.WriteString(f, s.String()) }
func (SyncKey) String() string                    { return "seat.SyncKey(" + redacted + ")" }
func (k SyncKey) GoString() string                { return k.String() }
func (k SyncKey) Format(f fmt.State, verb rune)   { io.WriteString(f, k.String()) }
func (id Identity) GoString() string              { return id.String() }
func (id Identity) Format(f fmt.State, verb rune) { io.WriteString(f, id.String()) }

// String shows only the public identity, as a did:key.
func (id Identity) String() string {
	if len(id.priv) != ed25519.PrivateKeySize {
		return "seat.Identity(invalid)"
	}
	return "seat.Identity(" + DIDKey(id.priv.Public().(ed25519.PublicKey)) + ")"
}

// A Seed is the 64-byte BIP-39 seed every long-term key derives from.
type Seed struct {
	_ [0]func()
	b [64]byte
}

// derive returns HKDF-SHA256 of the seed with the given label as info and no
// salt. A salt adds nothing here: the seed is already a uniformly random
// PBKDF2 output, and the labels separate the purposes.
func (s *Seed) derive(label string, n int) []byte {
	k, err := hkdf.Key(sha256.New, s.b[:], nil, label, n)
	if err != nil {
		panic("seat: internal error: " + err.Error())
	}
	return k
}

// SyncKey returns the key that seals this seat's sync batches.
func (s *Seed) SyncKey() *SyncKey {
	k := s.derive(labelSyncKey, 32)
	defer clear(k)
	sk, err := newSyncKey(k)
	if err != nil {
		panic("seat: internal error: " + err.Error())
	}
	return sk
}

// Identity returns the seat's Ed25519 identity key.
func (s *Seed) Identity() *Identity {
	k := s.derive(labelIdentity, ed25519.SeedSize)
	defer clear(k)
	return &Identity{priv: ed25519.NewKeyFromSeed(k)}
}

// An Identity is a seat's long-term Ed25519 signing key. It implements
// [crypto.Signer]; its string form is its did:key, never the private key.
type Identity struct {
	_    [0]func()
	priv ed25519.PrivateKey
}

// PublicKey returns the Ed25519 public key.
func (id *Identity) PublicKey() ed25519.PublicKey {
	return id.priv.Public().(ed25519.PublicKey)
}

// Public implements [crypto.Signer].
func (id *Identity) Public() crypto.PublicKey { return id.PublicKey() }

// Sign implements [crypto.Signer] with plain Ed25519 (opts must be
// crypto.Hash(0)) or Ed25519ctx/ph as [ed25519.PrivateKey.Sign] allows.
func (id *Identity) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	return id.priv.Sign(r, msg, opts)
}

// PrivateKey returns the private key, for the MLS engine's signature key.
// It must never be logged or stored.
func (id *Identity) PrivateKey() ed25519.PrivateKey {
	return append(ed25519.PrivateKey(nil), id.priv...)
}

// DID returns the identity as a did:key.
func (id *Identity) DID() string { return DIDKey(id.PublicKey()) }
