package mls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file creates KeyPackages (RFC 9420, Section 10) and holds their
// private parts until a Welcome consumes them.

// defaultKeyPackageLifetime is how long a generated KeyPackage is valid.
const defaultKeyPackageLifetime = 90 * 24 * time.Hour

// lifetimeSkew is how far into the past a generated lifetime starts, so a
// peer whose clock is slightly behind still accepts it.
const lifetimeSkew = time.Hour

// KeyPackageBundle is a KeyPackage together with its private keys: the
// HPKE private key of init_key, the HPKE private key of the leaf's
// encryption_key and the signature private key. Publish [KeyPackageBundle.Bytes]
// and keep the bundle until a Welcome for it arrives; a bundle is used for
// one join only (Section 16.8).
type KeyPackageBundle struct {
	s        suite
	kp       KeyPackage
	initPriv []byte
	encPriv  []byte
	sigPriv  []byte
}

// GenerateSignatureKey returns a fresh signature private key for the cipher
// suite, in the format [NewKeyPackage] and [NewGroup] expect (for Ed25519
// suites, the 32-byte seed).
func GenerateSignatureKey(cs CipherSuite) ([]byte, error) {
	s, err := suiteFor(cs)
	if err != nil {
		return nil, err
	}
	priv, _, err := s.signKeyPair()
	return priv, err
}

// NewKeyPackage generates a KeyPackage for the member whose identity is did
// (a BasicCredential holding the UTF-8 bytes of the did: string), signed
// with signatureKey. The init and leaf encryption keys are fresh. cfg may
// be nil.
func NewKeyPackage(cs CipherSuite, did string, signatureKey []byte, cfg *Config) (*KeyPackageBundle, error) {
	c := cfg.withDefaults()
	s, err := suiteFor(cs)
	if err != nil {
		return nil, err
	}
	if did == "" {
		return nil, errors.New("mls: empty identity")
	}
	sigPub, err := s.signPublicFromPrivate(signatureKey)
	if err != nil {
		return nil, fmt.Errorf("mls: invalid signature key: %w", err)
	}
	initPriv, initPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		return nil, err
	}
	encPriv, encPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		return nil, err
	}
	now := c.now()
	leaf := LeafNode{
		EncryptionKey:  encPub,
		SignatureKey:   sigPub,
		Credential:     Credential{CredentialType: CredentialTypeBasic, Identity: []byte(did)},
		Capabilities:   defaultCapabilities(cs, c.ExtensionTypes),
		LeafNodeSource: LeafNodeSourceKeyPackage,
		Lifetime: Lifetime{
			NotBefore: uint64(now.Add(-lifetimeSkew).Unix()),
			NotAfter:  uint64(now.Add(c.KeyPackageLifetime).Unix()),
		},
	}
	if err := leaf.sign(s, signatureKey, nil, 0); err != nil {
		return nil, err
	}
	kp := KeyPackage{
		Version:     ProtocolVersionMLS10,
		CipherSuite: cs,
		InitKey:     initPub,
		LeafNode:    leaf,
	}
	if err := kp.sign(s, signatureKey); err != nil {
		return nil, err
	}
	return &KeyPackageBundle{
		s:        s,
		kp:       kp,
		initPriv: initPriv,
		encPriv:  encPriv,
		sigPriv:  append([]byte(nil), signatureKey...),
	}, nil
}

// defaultCapabilities lists what this package supports (Section 7.2). The
// default extensions and proposal types need not be listed; the credential
// type in use must be, since peers check it when a member joins. The
// application's extension types ([Config.ExtensionTypes]) are listed so
// that a group may carry them (Section 13.4).
func defaultCapabilities(cs CipherSuite, exts []ExtensionType) Capabilities {
	return Capabilities{
		Versions:     []ProtocolVersion{ProtocolVersionMLS10},
		CipherSuites: []CipherSuite{cs},
		Extensions:   slices.Clone(exts),
		Credentials:  []CredentialType{CredentialTypeBasic},
	}
}

// Bytes returns the KeyPackage as an MLSMessage, the form in which it is
// published.
func (b *KeyPackageBundle) Bytes() []byte {
	kp := b.kp
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatKeyPackage, KeyPackage: &kp})
}

// Ref returns the KeyPackageRef (Section 5.2) that a Welcome uses to name
// this KeyPackage.
func (b *KeyPackageBundle) Ref() []byte { return b.kp.ref(b.s) }

// Identity returns the did: string of the KeyPackage's credential.
func (b *KeyPackageBundle) Identity() string { return string(b.kp.LeafNode.Credential.Identity) }

// keyPackageBundleVersion is the version of the bundle serialization.
const keyPackageBundleVersion = 1

// MarshalBinary encodes the bundle, private keys included, for storage.
func (b *KeyPackageBundle) MarshalBinary() ([]byte, error) {
	var w builder
	w.u8(keyPackageBundleVersion)
	b.kp.marshal(&w)
	w.vec(b.initPriv)
	w.vec(b.encPriv)
	w.vec(b.sigPriv)
	return w.bytes(), nil
}

// ParseKeyPackageBundle decodes a bundle written by
// [KeyPackageBundle.MarshalBinary] and checks that the private keys match
// the KeyPackage.
func ParseKeyPackageBundle(data []byte) (*KeyPackageBundle, error) {
	p := newParser(data)
	var v uint8
	b := &KeyPackageBundle{}
	if !p.u8(&v) || v != keyPackageBundleVersion || !b.kp.unmarshal(p) ||
		!p.vec(&b.initPriv) || !p.vec(&b.encPriv) || !p.vec(&b.sigPriv) || !p.empty() {
		return nil, errors.New("mls: malformed key package bundle")
	}
	s, err := suiteFor(b.kp.CipherSuite)
	if err != nil {
		return nil, err
	}
	b.s = s
	if err := b.check(); err != nil {
		return nil, err
	}
	return b, nil
}

// check verifies that the private keys belong to the public ones.
func (b *KeyPackageBundle) check() error {
	s := b.s
	if pub, err := s.hpkePublicFromPrivate(b.initPriv); err != nil || !bytes.Equal(pub, b.kp.InitKey) {
		return errors.New("mls: init private key does not match the key package")
	}
	if pub, err := s.hpkePublicFromPrivate(b.encPriv); err != nil || !bytes.Equal(pub, b.kp.LeafNode.EncryptionKey) {
		return errors.New("mls: encryption private key does not match the key package")
	}
	if pub, err := s.signPublicFromPrivate(b.sigPriv); err != nil || !bytes.Equal(pub, b.kp.LeafNode.SignatureKey) {
		return errors.New("mls: signature private key does not match the key package")
	}
	return nil
}

// parseKeyPackage decodes a KeyPackage given either as an MLSMessage or as
// a bare KeyPackage.
func parseKeyPackage(data []byte) (*KeyPackage, error) {
	var m mlsMessage
	if err := unmarshal(data, &m); err == nil {
		if m.WireFormat != WireFormatKeyPackage {
			return nil, errors.New("mls: message is not a key package")
		}
		return m.KeyPackage, nil
	}
	var kp KeyPackage
	if err := unmarshal(data, &kp); err != nil {
		return nil, errors.New("mls: malformed key package")
	}
	return &kp, nil
}
