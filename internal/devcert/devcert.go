// Package devcert holds the two statements a person's identity key makes
// about a linked device: the certificate that vouches for the device's
// keys, and the revocation that ends that for good. The seat makes and
// checks both; the directory checks them before it lets a certificate
// stand for an API key or a revocation cut one off.
//
// # Certificate
//
// A certificate is the identity key's Ed25519 signature over
//
//	CertLabel | person (32) | signing key (32) | HPKE key (32) | serial (4) | issued (4)
//
// person is the identity's public key, the signing key the device's own
// Ed25519 key (the one its room leaves are signed with), the HPKE key its
// X25519 key (what keys for it are sealed to), serial a number the
// identity holder counts up per certificate, and issued the Unix time in
// seconds, both big-endian. Its compact form, [Cert.Compact], leaves out
// what the verifier knows already (the person and the signing key):
//
//	HPKE key (32) | serial (4) | issued (4) | signature (64)   = 104 bytes
//
// # Revocation
//
// A revocation is, on the wire,
//
//	"SKR1" | person (32) | signing key (32) | revoked at (8, Unix ms) | signature (64)
//
// with the signature by person over RevocationLabel followed by the bytes
// before it. It names a device key, not a certificate: every certificate
// of that key is revoked, whatever its serial or issue time.
package devcert

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/internal/base58"
)

// Labels the identity key signs first, one per statement.
const (
	CertLabel       = "skytale device cert v1\x00"
	RevocationLabel = "skytale device revocation v1\x00"
)

// Sizes of the encodings.
const (
	CompactSize    = 32 + 4 + 4 + ed25519.SignatureSize
	RevocationSize = 4 + 32 + 32 + 8 + ed25519.SignatureSize
)

var revocationMagic = []byte("SKR1")

// ErrInvalid means the bytes are not a certificate or revocation the
// named identity signed.
var ErrInvalid = errors.New("devcert: not a valid device statement of this identity")

// Cert is a device certificate.
type Cert struct {
	Person     ed25519.PublicKey
	SigningKey ed25519.PublicKey
	HPKEKey    []byte // X25519 public key, 32 bytes
	Serial     uint32
	Issued     time.Time // whole seconds
	Sig        []byte
}

func certMessage(person, signing, hpkeKey []byte, serial uint32, issued uint32) []byte {
	m := make([]byte, 0, len(CertLabel)+32*3+8)
	m = append(m, CertLabel...)
	m = append(m, person...)
	m = append(m, signing...)
	m = append(m, hpkeKey...)
	m = binary.BigEndian.AppendUint32(m, serial)
	return binary.BigEndian.AppendUint32(m, issued)
}

// Issue certifies signing and hpkeKey as a device of identity.
func Issue(identity ed25519.PrivateKey, signing ed25519.PublicKey, hpkeKey []byte, serial uint32, issued time.Time) (Cert, error) {
	if len(signing) != ed25519.PublicKeySize || len(hpkeKey) != 32 {
		return Cert{}, errors.New("devcert: a device key has the wrong size")
	}
	person := identity.Public().(ed25519.PublicKey)
	if bytes.Equal(person, signing) {
		return Cert{}, errors.New("devcert: the identity key cannot be its own device")
	}
	at := uint32(issued.Unix())
	sig := ed25519.Sign(identity, certMessage(person, signing, hpkeKey, serial, at))
	return Cert{Person: person, SigningKey: bytes.Clone(signing), HPKEKey: bytes.Clone(hpkeKey), Serial: serial,
		Issued: time.Unix(int64(at), 0).UTC(), Sig: sig}, nil
}

// Compact is the certificate without the person and the signing key.
func (c Cert) Compact() []byte {
	b := make([]byte, 0, CompactSize)
	b = append(b, c.HPKEKey...)
	b = binary.BigEndian.AppendUint32(b, c.Serial)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Issued.Unix()))
	return append(b, c.Sig...)
}

// Parse reads a compact certificate of person for the device signing key
// signing, and checks the signature.
func Parse(person, signing, compact []byte) (Cert, error) {
	if len(person) != ed25519.PublicKeySize || len(signing) != ed25519.PublicKeySize || len(compact) != CompactSize ||
		bytes.Equal(person, signing) {
		return Cert{}, ErrInvalid
	}
	hk := compact[:32]
	serial := binary.BigEndian.Uint32(compact[32:36])
	at := binary.BigEndian.Uint32(compact[36:40])
	sig := compact[40:]
	if !ed25519.Verify(person, certMessage(person, signing, hk, serial, at), sig) {
		return Cert{}, ErrInvalid
	}
	return Cert{Person: bytes.Clone(person), SigningKey: bytes.Clone(signing), HPKEKey: bytes.Clone(hk), Serial: serial,
		Issued: time.Unix(int64(at), 0).UTC(), Sig: bytes.Clone(sig)}, nil
}

// Revocation revokes a device key of a person.
type Revocation struct {
	Person     ed25519.PublicKey
	SigningKey ed25519.PublicKey
	RevokedAt  time.Time // milliseconds
	raw        []byte
}

// Revoke makes identity's revocation of the device signing key at.
func Revoke(identity ed25519.PrivateKey, signing ed25519.PublicKey, at time.Time) (Revocation, error) {
	if len(signing) != ed25519.PublicKeySize {
		return Revocation{}, errors.New("devcert: a device key has the wrong size")
	}
	b := make([]byte, 0, RevocationSize)
	b = append(b, revocationMagic...)
	b = append(b, identity.Public().(ed25519.PublicKey)...)
	b = append(b, signing...)
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
	b = append(b, ed25519.Sign(identity, append([]byte(RevocationLabel), b...))...)
	return ParseRevocation(b)
}

// ParseRevocation reads a revocation and checks that the person it names
// signed it.
func ParseRevocation(b []byte) (Revocation, error) {
	if len(b) != RevocationSize || !bytes.Equal(b[:4], revocationMagic) {
		return Revocation{}, ErrInvalid
	}
	person, signing := b[4:36], b[36:68]
	body, sig := b[:RevocationSize-ed25519.SignatureSize], b[RevocationSize-ed25519.SignatureSize:]
	if bytes.Equal(person, signing) || !ed25519.Verify(person, append([]byte(RevocationLabel), body...), sig) {
		return Revocation{}, ErrInvalid
	}
	ms := binary.BigEndian.Uint64(b[68:76])
	if ms > 1<<62 {
		return Revocation{}, ErrInvalid
	}
	return Revocation{Person: bytes.Clone(person), SigningKey: bytes.Clone(signing),
		RevokedAt: time.UnixMilli(int64(ms)).UTC(), raw: bytes.Clone(b)}, nil
}

// Bytes is the revocation's wire form.
func (r Revocation) Bytes() []byte { return bytes.Clone(r.raw) }

// IdentityMark separates the person's did:key from the compact
// certificate in a linked device's member identity:
//
//	did:key:z6Mk…#dvc:z<base58btc of the compact certificate>
//
// The leaf (or join offer) that carries it is signed by the certified
// signing key, which is how the verifier gets it.
const IdentityMark = "#dvc:z"

// maxCompact58 bounds the base58 text of a compact certificate.
const maxCompact58 = 150

// MemberIdentity is the member identity of c's device, for the person
// whose did:key is did.
func MemberIdentity(did string, c Cert) string {
	return did + IdentityMark + base58.Encode(c.Compact())
}

// SplitIdentity splits a linked device's member identity into the
// person's did:key and the compact certificate; ok is false for anything
// else, including a base58 spelling that is not the canonical one.
func SplitIdentity(id string) (did string, compact []byte, ok bool) {
	did, c58, ok := strings.Cut(id, IdentityMark)
	if !ok || len(c58) > maxCompact58 {
		return "", nil, false
	}
	compact, err := base58.Decode(c58)
	if err != nil || len(compact) != CompactSize || base58.Encode(compact) != c58 {
		return "", nil, false
	}
	return did, compact, true
}
