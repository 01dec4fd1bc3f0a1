package seat

import (
	"crypto/ed25519"
	"strings"

	"github.com/skytale-oss/skytale/internal/base58"
)

// didKeyPrefix starts every Ed25519 did:key: the method prefix, then 'z' for
// base58btc in multibase.
const didKeyPrefix = "did:key:z"

// multicodecEd25519Pub is the multicodec code 0xed (ed25519-pub) as an
// unsigned varint.
var multicodecEd25519Pub = [2]byte{0xed, 0x01}

// DIDKey writes an Ed25519 public key as a did:key: "did:key:z" followed by
// the base58btc encoding of the multicodec prefix 0xed 0x01 and the 32 key
// bytes. Such identifiers always start with "did:key:z6Mk".
func DIDKey(pub ed25519.PublicKey) string {
	b := make([]byte, 0, 2+len(pub))
	b = append(b, multicodecEd25519Pub[:]...)
	b = append(b, pub...)
	return didKeyPrefix + base58.Encode(b)
}

// ParseDIDKey returns the Ed25519 public key a did:key names. It accepts only
// the canonical form DIDKey produces.
func ParseDIDKey(did string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(did, didKeyPrefix)
	if !ok || len(rest) > 64 {
		return nil, ErrNotDIDKey
	}
	b, err := base58.Decode(rest)
	if err != nil || len(b) != 2+ed25519.PublicKeySize || b[0] != multicodecEd25519Pub[0] || b[1] != multicodecEd25519Pub[1] {
		return nil, ErrNotDIDKey
	}
	return ed25519.PublicKey(b[2:]), nil
}
