package mls

import (
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"fmt"
)

// One HPKE context per recipient, many recipients under one info.
//
// An UpdatePath encrypts its path secrets to every node of the copath
// resolutions under the same EncryptContext (RFC 9420, Section 7.6 and
// 5.1.3): to about a thousand leaves when a large tree has blank parents.
// crypto/hpke computes the info's part of the key schedule again for each
// recipient. For the suites with DHKEM(X25519, HKDF-SHA256), hpkeSealer
// follows RFC 9180 itself (SetupBaseS and one Seal, Sections 4.1, 5.1,
// 5.2), computes psk_id_hash and info_hash once, and skips the exporter
// secret, which MLS never asks for. Each encryption still has its own
// ephemeral key from crypto/ecdh. Other suites go through hpkeSeal.

const (
	hpkeKEMX25519SHA256 = 0x0020
	hpkeKDFSHA256       = 0x0001
	hpkeModeBase        = 0x00
	hpkeNonceLen        = 12
)

// hpkeSealer returns a function that does what hpkeSeal(pub, info, nil,
// pt) does, for any number of recipients. It is safe for concurrent use.
func (s *cipherSuite) hpkeSealer(info []byte) func(pub, pt []byte) (kemOutput, ct []byte, err error) {
	switch s.cs {
	case MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519, MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519:
	default:
		return func(pub, pt []byte) ([]byte, []byte, error) { return s.hpkeSeal(pub, info, nil, pt) }
	}
	aead := s.hpkeAEAD.ID()
	kemSuite := []byte{'K', 'E', 'M', hpkeKEMX25519SHA256 >> 8, hpkeKEMX25519SHA256 & 0xff}
	hpkeSuite := []byte{'H', 'P', 'K', 'E', hpkeKEMX25519SHA256 >> 8, hpkeKEMX25519SHA256 & 0xff,
		hpkeKDFSHA256 >> 8, hpkeKDFSHA256 & 0xff, byte(aead >> 8), byte(aead)}
	// RFC 9180, Section 5.1: key_schedule_context, without PSK.
	ksc := []byte{hpkeModeBase}
	ksc = append(ksc, hpkeLabeledExtract(s, hpkeSuite, nil, "psk_id_hash", nil)...)
	ksc = append(ksc, hpkeLabeledExtract(s, hpkeSuite, nil, "info_hash", info)...)
	return func(pub, pt []byte) ([]byte, []byte, error) {
		pkR, err := ecdh.X25519().NewPublicKey(pub)
		if err != nil {
			return nil, nil, errors.New("mls: invalid HPKE public key")
		}
		// Section 4.1, Encap: DH with a fresh ephemeral key, then
		// ExtractAndExpand over enc || pkRm.
		skE, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("mls: HPKE setup: %w", err)
		}
		dh, err := skE.ECDH(pkR)
		if err != nil {
			return nil, nil, fmt.Errorf("mls: HPKE setup: %w", err)
		}
		enc := skE.PublicKey().Bytes()
		kemContext := make([]byte, 0, len(enc)+len(pub))
		kemContext = append(append(kemContext, enc...), pub...)
		eaePRK := hpkeLabeledExtract(s, kemSuite, nil, "eae_prk", dh)
		shared := hpkeLabeledExpand(s, kemSuite, eaePRK, "shared_secret", kemContext, s.nh)
		clear(dh)
		clear(eaePRK)
		// Section 5.1, KeySchedule, and the first Seal (sequence number
		// 0, so the nonce is base_nonce).
		secret := hpkeLabeledExtract(s, hpkeSuite, shared, "secret", nil)
		clear(shared)
		key := hpkeLabeledExpand(s, hpkeSuite, secret, "key", ksc, s.nk)
		nonce := hpkeLabeledExpand(s, hpkeSuite, secret, "base_nonce", ksc, hpkeNonceLen)
		clear(secret)
		ct, err := s.aeadSeal(key, nonce, nil, pt)
		clear(key)
		if err != nil {
			return nil, nil, fmt.Errorf("mls: HPKE seal: %w", err)
		}
		return enc, ct, nil
	}
}

// hpkeLabeledExtract is LabeledExtract of RFC 9180, Section 4.
func hpkeLabeledExtract(s *cipherSuite, suiteID, salt []byte, label string, ikm []byte) []byte {
	b := make([]byte, 0, 7+len(suiteID)+len(label)+len(ikm))
	b = append(b, "HPKE-v1"...)
	b = append(b, suiteID...)
	b = append(b, label...)
	b = append(b, ikm...)
	return s.extract(salt, b)
}

// hpkeLabeledExpand is LabeledExpand of RFC 9180, Section 4.
func hpkeLabeledExpand(s *cipherSuite, suiteID, prk []byte, label string, info []byte, n int) []byte {
	b := make([]byte, 0, 9+len(suiteID)+len(label)+len(info))
	b = append(b, byte(n>>8), byte(n))
	b = append(b, "HPKE-v1"...)
	b = append(b, suiteID...)
	b = append(b, label...)
	b = append(b, info...)
	return s.expand(prk, b, n)
}
