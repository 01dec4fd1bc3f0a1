package mls

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/mlkem"
	"errors"
	"fmt"
)

// This file validates the public keys that other members and strangers
// send (RFC 9420, Section 5.1.1), at every place one enters the group
// state: the init_key and leaf of a KeyPackage (Section 10.1), the leaves
// of Updates and UpdatePaths and every leaf of a ratchet tree from a
// Welcome (Section 7.3, through LeafNode.verifySignature), the parent keys
// and kem_outputs of an UpdatePath (mergeUpdatePath), the parent keys of a
// received tree (validateStructure), and the external_pub and kem_output
// of external initialisation (Section 8.3).
//
// A key that cannot be used is worse than a bad signature: once stored in
// the tree, every member that later encrypts to it (any commit whose path
// covers the leaf) fails, so one KeyPackage could stop a whole group from
// committing. The checks are those of the suite's primitives:
//
//   - X25519 (RFC 7748): any 32 bytes decode, so points of small order are
//     refused explicitly: encapsulating to one gives an all-zero shared
//     secret, which crypto/ecdh refuses (RFC 7748, Section 6.1);
//   - P-256, P-384, P-521: the uncompressed point must be on the curve and
//     not the identity (crypto/ecdh checks both);
//   - X-Wing: exactly 1,216 bytes, an ML-KEM-768 encapsulation key that
//     passes the modulus check of FIPS 203, Section 7.2 (mlkem768KeyCheck,
//     which accepts exactly the keys crypto/mlkem.NewEncapsulationKey768
//     accepts), followed by an X25519 key that is not of small order,
//     since crypto/ecdh refuses to encapsulate to one as for DHKEM; a
//     kem_output is exactly 1,120 bytes, and its X25519 part not of small
//     order either (any ML-KEM ciphertext decapsulates, by implicit
//     rejection, so that part needs no check);
//   - Ed25519 signature keys are 32 bytes (RFC 8032; an invalid point then
//     fails every verification), ECDSA keys an uncompressed point on the
//     curve.
//
// The keys are public, so none of this needs to run in constant time.

var errInvalidPublicKey = errors.New("mls: invalid public key")

// x25519SmallOrder lists the u-coordinates, with bit 255 clear, whose
// X25519 product with every clamped scalar is zero: those of the points of
// small order (dividing 8) on the curve and its twist, and the
// non-canonical encodings u+p that fit in 255 bits (the same list as
// libsodium's; TestX25519SmallOrderTable checks each against crypto/ecdh).
// X25519 ignores bit 255 (RFC 7748, Section 5), so it is masked before
// comparing.
var x25519SmallOrder = [...][32]byte{
	// 0
	{},
	// 1
	{1},
	// order 8
	{0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a,
		0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00},
	// order 8
	{0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b,
		0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57},
	// p-1
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// p, the non-canonical 0
	{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// p+1, the non-canonical 1
	{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
}

// x25519IsSmallOrder reports whether the 32-byte X25519 public key pub is
// in x25519SmallOrder.
func x25519IsSmallOrder(pub []byte) bool {
	for i := range x25519SmallOrder {
		p := &x25519SmallOrder[i]
		if string(pub[:31]) == string(p[:31]) && pub[31]&0x7f == p[31] {
			return true
		}
	}
	return false
}

// checkHPKEPublicKey reports whether pub is a usable HPKEPublicKey of the
// suite's KEM (Section 5.1.1, RFC 9180 Section 4): DeserializePublicKey
// accepts it and, for X25519, it is not of small order.
func (s *cipherSuite) checkHPKEPublicKey(pub []byte) error {
	if s.xwing {
		return checkXWingPublicKey(pub)
	}
	if s.x25519 {
		// Every 32-byte string decodes as an X25519 key (RFC 7748,
		// Section 5), so only the length and the small-order points
		// need checking; this runs for every leaf of a joined tree.
		if len(pub) != 32 {
			return fmt.Errorf("%w: X25519 key of %d bytes", errInvalidPublicKey, len(pub))
		}
		if x25519IsSmallOrder(pub) {
			return fmt.Errorf("%w: X25519 point of small order", errInvalidPublicKey)
		}
		return nil
	}
	if _, err := s.kem.NewPublicKey(pub); err != nil {
		return fmt.Errorf("%w: HPKE key does not decode", errInvalidPublicKey)
	}
	return nil
}

// checkKEMOutput reports whether enc is a usable kem_output of the suite's
// KEM (RFC 9180, Section 4): for DHKEM it is the sender's ephemeral public
// key, checked like any other public key; for X-Wing a ciphertext.
func (s *cipherSuite) checkKEMOutput(enc []byte) error {
	if !s.xwing {
		return s.checkHPKEPublicKey(enc)
	}
	if len(enc) != xwingCiphertextSize {
		return fmt.Errorf("%w: X-Wing ciphertext of %d bytes", errInvalidPublicKey, len(enc))
	}
	if x25519IsSmallOrder(enc[xwingCiphertextSize-32:]) {
		return fmt.Errorf("%w: X-Wing ciphertext with an X25519 point of small order", errInvalidPublicKey)
	}
	return nil
}

// checkXWingPublicKey checks an X-Wing public key: its length, the
// ML-KEM-768 encapsulation key check (the coefficients decode below the
// modulus q) and the small-order check of its X25519 part.
func checkXWingPublicKey(pub []byte) error {
	if len(pub) != xwingPublicKeySize {
		return fmt.Errorf("%w: X-Wing key of %d bytes", errInvalidPublicKey, len(pub))
	}
	if !mlkem768KeyCheck(pub[:mlkem.EncapsulationKeySize768]) {
		return fmt.Errorf("%w: X-Wing key fails the ML-KEM-768 encapsulation key check", errInvalidPublicKey)
	}
	if x25519IsSmallOrder(pub[mlkem.EncapsulationKeySize768:]) {
		return fmt.Errorf("%w: X-Wing key with an X25519 point of small order", errInvalidPublicKey)
	}
	return nil
}

// mlkem768KeyCheck is the encapsulation key check of FIPS 203, Section
// 7.2, for ML-KEM-768: the key is 384k+32 bytes (k = 3), and every 12-bit
// coefficient of its k polynomials (ByteDecode12 of the first 384k bytes)
// is below q = 3329, so that ByteEncode12(ByteDecode12(ek)) = ek. The last
// 32 bytes, the seed rho, may be anything.
//
// crypto/mlkem.NewEncapsulationKey768 makes the same check but also
// expands the matrix A from rho, nine SHAKE128 streams, which is most of
// its cost; a joiner checks every leaf and parent key of a tree it never
// encrypts to, so the check is made here without that work.
// TestMLKEM768KeyCheck and FuzzXWingKeyChecks hold it to the standard
// library's answer.
func mlkem768KeyCheck(ek []byte) bool {
	const q = 3329
	if len(ek) != mlkem.EncapsulationKeySize768 {
		return false
	}
	t := ek[:mlkem.EncapsulationKeySize768-32]
	for i := 0; i+2 < len(t); i += 3 {
		d1 := uint16(t[i]) | uint16(t[i+1]&0x0f)<<8
		d2 := uint16(t[i+1])>>4 | uint16(t[i+2])<<4
		if d1 >= q || d2 >= q {
			return false
		}
	}
	return true
}

// checkSignaturePublicKey reports whether pub is a well-formed
// SignaturePublicKey of the suite (Section 5.1.1).
func (s *cipherSuite) checkSignaturePublicKey(pub []byte) error {
	if s.curve == nil {
		if len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: Ed25519 key of %d bytes", errInvalidPublicKey, len(pub))
		}
		return nil
	}
	if _, err := ecdsa.ParseUncompressedPublicKey(s.curve, pub); err != nil {
		return fmt.Errorf("%w: ECDSA key is not a point on the curve", errInvalidPublicKey)
	}
	return nil
}

func (s *cipherSuite) privateKeyLen() int { return s.nsk }

// checkKeys checks the public keys of a received LeafNode and that its
// extension types are distinct (Section 13.4).
func (x *LeafNode) checkKeys(s suite) error {
	if err := s.checkHPKEPublicKey(x.EncryptionKey); err != nil {
		return fmt.Errorf("leaf encryption_key: %w", err)
	}
	if err := s.checkSignaturePublicKey(x.SignatureKey); err != nil {
		return fmt.Errorf("leaf signature_key: %w", err)
	}
	if hasDuplicateExtensions(x.Extensions) {
		return errors.New("mls: duplicate leaf extension types")
	}
	return nil
}

// checkKeys checks the init_key of a received KeyPackage and that its
// extension types are distinct (Sections 10.1 and 13.4); its leaf is
// checked by LeafNode.checkKeys.
func (x *KeyPackage) checkKeys(s suite) error {
	if err := s.checkHPKEPublicKey(x.InitKey); err != nil {
		return fmt.Errorf("key package init_key: %w", err)
	}
	if hasDuplicateExtensions(x.Extensions) {
		return errors.New("mls: duplicate key package extension types")
	}
	return nil
}

// checkPathKeys checks every public key an UpdatePath carries: the new
// public key of each node and the kem_output of each encrypted path
// secret. Checking all kem_outputs, not only the one this member
// decrypts, keeps members from disagreeing about a Commit (Section 7.6).
func checkPathKeys(s suite, path *updatePath) error {
	for i := range path.Nodes {
		n := &path.Nodes[i]
		if err := s.checkHPKEPublicKey(n.EncryptionKey); err != nil {
			return fmt.Errorf("update path node %d: %w", i, err)
		}
		for j := range n.EncryptedPathSecret {
			if err := s.checkKEMOutput(n.EncryptedPathSecret[j].KEMOutput); err != nil {
				return fmt.Errorf("update path node %d, ciphertext %d kem_output: %w", i, j, err)
			}
		}
	}
	return nil
}
