package mls

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// CipherSuite is the wire identifier of an MLS cipher suite (RFC 9420,
// Sections 5.1 and 17.1).
type CipherSuite uint16

// The cipher suites registered by RFC 9420, Section 17.1. Suites 4 and 6
// are listed for completeness but are not implemented.
const (
	MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519        CipherSuite = 0x0001
	MLS_128_DHKEMP256_AES128GCM_SHA256_P256             CipherSuite = 0x0002
	MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519 CipherSuite = 0x0003
	MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448            CipherSuite = 0x0004
	MLS_256_DHKEMP521_AES256GCM_SHA512_P521             CipherSuite = 0x0005
	MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448     CipherSuite = 0x0006
	MLS_256_DHKEMP384_AES256GCM_SHA384_P384             CipherSuite = 0x0007
)

// MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519 is the post-quantum hybrid
// suite: the X-Wing KEM (ML-KEM-768 combined with X25519, HPKE KEM
// 0x647A) for every HPKE use, HKDF-SHA256, ChaCha20-Poly1305 and Ed25519
// signatures. Its code point is not in the IANA registry yet: 0x004D is the
// one OpenMLS uses for the same primitives. Only confidentiality is
// post-quantum; signatures remain Ed25519.
const MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519 CipherSuite = 0x004D

// SupportedSuites lists the cipher suites this package implements, the
// mandatory-to-implement suite 1 first (RFC 9420, Section 17.1).
func SupportedSuites() []CipherSuite {
	return []CipherSuite{
		MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519,
		MLS_128_DHKEMP256_AES128GCM_SHA256_P256,
		MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519,
		MLS_256_DHKEMP521_AES256GCM_SHA512_P521,
		MLS_256_DHKEMP384_AES256GCM_SHA384_P384,
		MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519,
	}
}

// String returns the name of the suite, or its code point in hexadecimal
// when it has none here.
func (cs CipherSuite) String() string {
	switch cs {
	case MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519:
		return "MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519"
	case MLS_128_DHKEMP256_AES128GCM_SHA256_P256:
		return "MLS_128_DHKEMP256_AES128GCM_SHA256_P256"
	case MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519:
		return "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519"
	case MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448:
		return "MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448"
	case MLS_256_DHKEMP521_AES256GCM_SHA512_P521:
		return "MLS_256_DHKEMP521_AES256GCM_SHA512_P521"
	case MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448:
		return "MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448"
	case MLS_256_DHKEMP384_AES256GCM_SHA384_P384:
		return "MLS_256_DHKEMP384_AES256GCM_SHA384_P384"
	case MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519:
		return "MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519"
	}
	return fmt.Sprintf("0x%04x", uint16(cs))
}

// PostQuantum reports whether the suite's key exchange resists a quantum
// adversary, so that what is recorded today cannot be opened later.
func (cs CipherSuite) PostQuantum() bool {
	return cs == MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519
}

var errUnsupportedSuite = errors.New("mls: unsupported cipher suite")

// suite is the set of primitives of one cipher suite (Section 5.1). The
// interface is sealed: the only implementation is cipherSuite below, so the
// set of suites stays closed and reviewable.
type suite interface {
	id() CipherSuite
	hashLen() int
	aeadKeyLen() int
	aeadNonceLen() int
	hash(data []byte) []byte
	mac(key, data []byte) []byte
	extract(salt, ikm []byte) []byte
	expand(prk, info []byte, n int) []byte
	aeadSeal(key, nonce, aad, pt []byte) ([]byte, error)
	aeadOpen(key, nonce, aad, ct []byte) ([]byte, error)
	hpkeSeal(pub, info, aad, pt []byte) (kemOutput, ct []byte, err error)
	hpkeOpen(priv, kemOutput, info, aad, ct []byte) ([]byte, error)
	hpkeDeriveKeyPair(ikm []byte) (priv, pub []byte, err error)
	hpkeGenerateKeyPair() (priv, pub []byte, err error)
	hpkePublicFromPrivate(priv []byte) ([]byte, error)
	signKeyPair() (priv, pub []byte, err error)
	signPublicFromPrivate(priv []byte) ([]byte, error)
	signKey(priv []byte) (signingKey, error)
	sign(priv, msg []byte) ([]byte, error)
	verify(pub, msg, sig []byte) bool
	// Validation of received public keys and of stored private keys
	// (keyvalidate.go).
	checkHPKEPublicKey(pub []byte) error
	checkKEMOutput(enc []byte) error
	checkSignaturePublicKey(pub []byte) error
	privateKeyLen() int
}

// cipherSuite composes the primitives named by a suite identifier.
type cipherSuite struct {
	cs      CipherSuite
	newHash func() hash.Hash
	nh      int
	// AEAD (Section 5.1): key and nonce sizes, and the constructor.
	nk, nn  int
	newAEAD func(key []byte) (cipher.AEAD, error)
	// HPKE (RFC 9180) with the suite's KEM, KDF and AEAD.
	kem      hpke.KEM
	hpkeKDF  hpke.KDF
	hpkeAEAD hpke.AEAD
	// Signature scheme: Ed25519 when curve is nil, otherwise ECDSA over
	// curve with sigHash as the message digest.
	curve   elliptic.Curve
	sigHash func() hash.Hash
	// x25519 is set when the KEM is DHKEM(X25519), whose public keys
	// need the small-order check of keyvalidate.go.
	x25519 bool
	// xwing is set when the KEM is X-Wing (MLKEM768-X25519): its key
	// pairs derive from a 32-byte seed (hpkeDeriveKeyPair) and its keys
	// and ciphertexts have their own checks (keyvalidate.go).
	xwing bool
	// nsk is the length of HPKE private keys (RFC 9180, Section 7.1),
	// which is also the length of the suite's signature private keys: the
	// Ed25519 seed or the ECDSA scalar.
	nsk int
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

var (
	suiteX25519AES128 = &cipherSuite{
		cs: MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519, newHash: sha256.New, nh: 32,
		nk: 16, nn: 12, newAEAD: newGCM,
		kem: hpke.DHKEM(ecdh.X25519()), hpkeKDF: hpke.HKDFSHA256(), hpkeAEAD: hpke.AES128GCM(),
		x25519: true, nsk: 32,
	}
	suiteP256AES128 = &cipherSuite{
		cs: MLS_128_DHKEMP256_AES128GCM_SHA256_P256, newHash: sha256.New, nh: 32,
		nk: 16, nn: 12, newAEAD: newGCM,
		kem: hpke.DHKEM(ecdh.P256()), hpkeKDF: hpke.HKDFSHA256(), hpkeAEAD: hpke.AES128GCM(),
		curve: elliptic.P256(), sigHash: sha256.New, nsk: 32,
	}
	suiteX25519ChaCha = &cipherSuite{
		cs: MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519, newHash: sha256.New, nh: 32,
		nk: 32, nn: 12, newAEAD: chacha20poly1305.New,
		kem: hpke.DHKEM(ecdh.X25519()), hpkeKDF: hpke.HKDFSHA256(), hpkeAEAD: hpke.ChaCha20Poly1305(),
		x25519: true, nsk: 32,
	}
	suiteP521AES256 = &cipherSuite{
		cs: MLS_256_DHKEMP521_AES256GCM_SHA512_P521, newHash: sha512.New, nh: 64,
		nk: 32, nn: 12, newAEAD: newGCM,
		kem: hpke.DHKEM(ecdh.P521()), hpkeKDF: hpke.HKDFSHA512(), hpkeAEAD: hpke.AES256GCM(),
		curve: elliptic.P521(), sigHash: sha512.New, nsk: 66,
	}
	suiteP384AES256 = &cipherSuite{
		cs: MLS_256_DHKEMP384_AES256GCM_SHA384_P384, newHash: sha512.New384, nh: 48,
		nk: 32, nn: 12, newAEAD: newGCM,
		kem: hpke.DHKEM(ecdh.P384()), hpkeKDF: hpke.HKDFSHA384(), hpkeAEAD: hpke.AES256GCM(),
		curve: elliptic.P384(), sigHash: sha512.New384, nsk: 48,
	}
	suiteXWingChaCha = &cipherSuite{
		cs: MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519, newHash: sha256.New, nh: 32,
		nk: 32, nn: 12, newAEAD: chacha20poly1305.New,
		kem: hpke.MLKEM768X25519(), hpkeKDF: hpke.HKDFSHA256(), hpkeAEAD: hpke.ChaCha20Poly1305(),
		xwing: true, nsk: xwingSeedSize,
	}
)

// suiteFor returns the primitives of cs, or an error wrapping
// errUnsupportedSuite for suites 4 and 6 and unknown identifiers.
func suiteFor(cs CipherSuite) (suite, error) {
	switch cs {
	case MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519:
		return suiteX25519AES128, nil
	case MLS_128_DHKEMP256_AES128GCM_SHA256_P256:
		return suiteP256AES128, nil
	case MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519:
		return suiteX25519ChaCha, nil
	case MLS_256_DHKEMP521_AES256GCM_SHA512_P521:
		return suiteP521AES256, nil
	case MLS_256_DHKEMP384_AES256GCM_SHA384_P384:
		return suiteP384AES256, nil
	case MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519:
		return suiteXWingChaCha, nil
	case MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448, MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448:
		return nil, fmt.Errorf("%w 0x%04x: X448/Ed448 not implemented", errUnsupportedSuite, uint16(cs))
	}
	return nil, fmt.Errorf("%w 0x%04x", errUnsupportedSuite, uint16(cs))
}

func (s *cipherSuite) id() CipherSuite   { return s.cs }
func (s *cipherSuite) hashLen() int      { return s.nh }
func (s *cipherSuite) aeadKeyLen() int   { return s.nk }
func (s *cipherSuite) aeadNonceLen() int { return s.nn }

func (s *cipherSuite) hash(data []byte) []byte {
	// The one-shot functions need no hash state on the heap; tree hashes
	// are computed by the tens of thousands.
	switch s.nh {
	case sha256.Size:
		h := sha256.Sum256(data)
		return h[:]
	case sha512.Size384:
		h := sha512.Sum384(data)
		return h[:]
	case sha512.Size:
		h := sha512.Sum512(data)
		return h[:]
	}
	h := s.newHash()
	h.Write(data)
	return h.Sum(nil)
}

func (s *cipherSuite) mac(key, data []byte) []byte {
	m := hmac.New(s.newHash, key)
	m.Write(data)
	return m.Sum(nil)
}

// extract is HKDF-Extract (RFC 5869, Section 2.2). An empty salt is the
// same HMAC key as Nh zero bytes, as RFC 5869 requires.
func (s *cipherSuite) extract(salt, ikm []byte) []byte {
	return s.mac(salt, ikm)
}

// expand is HKDF-Expand (RFC 5869, Section 2.3). MLS only asks for
// lengths fixed by the protocol; asking for more than 255*Nh bytes is a
// programming error.
func (s *cipherSuite) expand(prk, info []byte, n int) []byte {
	if n < 0 || n > 255*s.nh {
		panic("mls: internal error: HKDF-Expand length out of range")
	}
	out := make([]byte, 0, n+s.nh)
	var t []byte
	for i := byte(1); len(out) < n; i++ {
		m := hmac.New(s.newHash, prk)
		m.Write(t)
		m.Write(info)
		m.Write([]byte{i})
		t = m.Sum(nil)
		out = append(out, t...)
	}
	return out[:n:n]
}

func (s *cipherSuite) aead(key, nonce []byte) (cipher.AEAD, error) {
	if len(key) != s.nk || len(nonce) != s.nn {
		return nil, errors.New("mls: wrong AEAD key or nonce length")
	}
	return s.newAEAD(key)
}

func (s *cipherSuite) aeadSeal(key, nonce, aad, pt []byte) ([]byte, error) {
	a, err := s.aead(key, nonce)
	if err != nil {
		return nil, err
	}
	return a.Seal(nil, nonce, pt, aad), nil
}

func (s *cipherSuite) aeadOpen(key, nonce, aad, ct []byte) ([]byte, error) {
	a, err := s.aead(key, nonce)
	if err != nil {
		return nil, err
	}
	pt, err := a.Open(nil, nonce, ct, aad)
	if err != nil {
		return nil, errors.New("mls: AEAD decryption failed")
	}
	return pt, nil
}

// hpkeSeal is SetupBaseS followed by one Seal (RFC 9180, Section 5.1).
func (s *cipherSuite) hpkeSeal(pub, info, aad, pt []byte) (kemOutput, ct []byte, err error) {
	pk, err := s.kem.NewPublicKey(pub)
	if err != nil {
		return nil, nil, errors.New("mls: invalid HPKE public key")
	}
	enc, sender, err := hpke.NewSender(pk, s.hpkeKDF, s.hpkeAEAD, info)
	if err != nil {
		return nil, nil, fmt.Errorf("mls: HPKE setup: %w", err)
	}
	ct, err = sender.Seal(aad, pt)
	if err != nil {
		return nil, nil, fmt.Errorf("mls: HPKE seal: %w", err)
	}
	return enc, ct, nil
}

// hpkeOpen is SetupBaseR followed by one Open (RFC 9180, Section 5.1).
func (s *cipherSuite) hpkeOpen(priv, kemOutput, info, aad, ct []byte) ([]byte, error) {
	sk, err := s.kem.NewPrivateKey(priv)
	if err != nil {
		return nil, errors.New("mls: invalid HPKE private key")
	}
	r, err := hpke.NewRecipient(kemOutput, sk, s.hpkeKDF, s.hpkeAEAD, info)
	if err != nil {
		return nil, errors.New("mls: HPKE decapsulation failed")
	}
	pt, err := r.Open(aad, ct)
	if err != nil {
		return nil, errors.New("mls: HPKE decryption failed")
	}
	return pt, nil
}

func hpkeKeyBytes(sk hpke.PrivateKey) (priv, pub []byte, err error) {
	priv, err = sk.Bytes()
	if err != nil {
		return nil, nil, fmt.Errorf("mls: HPKE private key: %w", err)
	}
	return priv, sk.PublicKey().Bytes(), nil
}

// X-Wing sizes (draft-connolly-cfrg-xwing-kem, Section 5): the private key
// is a 32-byte seed; the public key is the ML-KEM-768 encapsulation key
// followed by the X25519 public key, and the ciphertext the ML-KEM-768
// ciphertext followed by the ephemeral X25519 public key.
const (
	xwingSeedSize       = 32
	xwingPublicKeySize  = 1184 + 32
	xwingCiphertextSize = 1088 + 32
)

// hpkeDeriveKeyPair is DeriveKeyPair of RFC 9180, Section 7.1.3, which
// MLS uses to turn a node secret into a node key pair (RFC 9420, Section
// 7.4) and the external_secret into external_pub (Section 8).
//
// For X-Wing it is the DeriveKeyPair of the X-Wing specification
// (draft-connolly-cfrg-xwing-kem-06, Section 5.4): the private key is
// the seed SHAKE256(ikm, 32). That is what OpenMLS (hpke-rs) and ts-mls
// (hpke-js) compute for this suite. The DeriveKeyPair method of
// crypto/hpke's MLKEM768X25519 follows draft-ietf-hpke-pq instead, a
// labelled SHAKE256 derivation that yields other keys from the same
// secret: members using it would not find the keys their peers derive, so
// it is not used here.
func (s *cipherSuite) hpkeDeriveKeyPair(ikm []byte) (priv, pub []byte, err error) {
	if s.xwing {
		sk, err := s.kem.NewPrivateKey(sha3.SumSHAKE256(ikm, xwingSeedSize))
		if err != nil {
			return nil, nil, fmt.Errorf("mls: X-Wing DeriveKeyPair: %w", err)
		}
		return hpkeKeyBytes(sk)
	}
	sk, err := s.kem.DeriveKeyPair(ikm)
	if err != nil {
		return nil, nil, fmt.Errorf("mls: HPKE DeriveKeyPair: %w", err)
	}
	return hpkeKeyBytes(sk)
}

func (s *cipherSuite) hpkeGenerateKeyPair() (priv, pub []byte, err error) {
	sk, err := s.kem.GenerateKey()
	if err != nil {
		return nil, nil, fmt.Errorf("mls: HPKE key generation: %w", err)
	}
	return hpkeKeyBytes(sk)
}

func (s *cipherSuite) hpkePublicFromPrivate(priv []byte) ([]byte, error) {
	sk, err := s.kem.NewPrivateKey(priv)
	if err != nil {
		return nil, errors.New("mls: invalid HPKE private key")
	}
	return sk.PublicKey().Bytes(), nil
}

// Signature keys. Ed25519 private keys are the 32-byte seed of RFC 8032;
// ECDSA private keys are the scalar as a fixed-length big-endian string and
// public keys the uncompressed point. ECDSA signatures are DER encoded
// (RFC 9420, Section 5.1.2).

func (s *cipherSuite) signKeyPair() (priv, pub []byte, err error) {
	if s.curve == nil {
		pk, sk, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		return sk.Seed(), pk, nil
	}
	sk, err := ecdsa.GenerateKey(s.curve, rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	priv, err = sk.Bytes()
	if err != nil {
		return nil, nil, err
	}
	pub, err = sk.PublicKey.Bytes()
	if err != nil {
		return nil, nil, err
	}
	return priv, pub, nil
}

// signingKey is a parsed signature private key. Parsing costs a scalar
// multiplication (Ed25519 expands its seed, ECDSA checks the scalar), so a
// caller that signs several messages with one key parses it once.
type signingKey interface {
	public() []byte
	sign(msg []byte) ([]byte, error)
}

type ed25519Key struct{ k ed25519.PrivateKey }

func (k ed25519Key) public() []byte { return k.k.Public().(ed25519.PublicKey) }

func (k ed25519Key) sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.k, msg), nil }

type ecdsaKey struct {
	k       *ecdsa.PrivateKey
	sigHash func() hash.Hash
}

func (k ecdsaKey) public() []byte {
	pub, err := k.k.PublicKey.Bytes()
	if err != nil {
		panic("mls: internal error: encoding a valid ECDSA public key failed")
	}
	return pub
}

func (k ecdsaKey) sign(msg []byte) ([]byte, error) {
	h := k.sigHash()
	h.Write(msg)
	return ecdsa.SignASN1(rand.Reader, k.k, h.Sum(nil))
}

func (s *cipherSuite) signKey(priv []byte) (signingKey, error) {
	if s.curve == nil {
		if len(priv) != ed25519.SeedSize {
			return nil, errors.New("mls: invalid signature private key")
		}
		return ed25519Key{ed25519.NewKeyFromSeed(priv)}, nil
	}
	sk, err := ecdsa.ParseRawPrivateKey(s.curve, priv)
	if err != nil {
		return nil, errors.New("mls: invalid signature private key")
	}
	return ecdsaKey{sk, s.sigHash}, nil
}

func (s *cipherSuite) signPublicFromPrivate(priv []byte) ([]byte, error) {
	k, err := s.signKey(priv)
	if err != nil {
		return nil, err
	}
	return k.public(), nil
}

func (s *cipherSuite) sign(priv, msg []byte) ([]byte, error) {
	k, err := s.signKey(priv)
	if err != nil {
		return nil, err
	}
	return k.sign(msg)
}

func (s *cipherSuite) verify(pub, msg, sig []byte) bool {
	if s.curve == nil {
		if len(pub) != ed25519.PublicKeySize {
			return false
		}
		return ed25519.Verify(pub, msg, sig)
	}
	pk, err := ecdsa.ParseUncompressedPublicKey(s.curve, pub)
	if err != nil {
		return false
	}
	h := s.sigHash()
	h.Write(msg)
	return ecdsa.VerifyASN1(pk, h.Sum(nil), sig)
}
