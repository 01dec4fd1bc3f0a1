package mls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Capabilities lists what a client supports (RFC 9420, Section 7.2).
//
//	struct {
//	    ProtocolVersion versions<V>;
//	    CipherSuite cipher_suites<V>;
//	    ExtensionType extensions<V>;
//	    ProposalType proposals<V>;
//	    CredentialType credentials<V>;
//	} Capabilities;
type Capabilities struct {
	Versions     []ProtocolVersion
	CipherSuites []CipherSuite
	Extensions   []ExtensionType
	Proposals    []ProposalType
	Credentials  []CredentialType
}

func (x *Capabilities) marshal(b *builder) {
	marshalU16List(b, x.Versions)
	marshalU16List(b, x.CipherSuites)
	marshalU16List(b, x.Extensions)
	marshalU16List(b, x.Proposals)
	marshalU16List(b, x.Credentials)
}

func (x *Capabilities) unmarshal(p *parser) bool {
	return unmarshalU16List(p, &x.Versions) &&
		unmarshalU16List(p, &x.CipherSuites) &&
		unmarshalU16List(p, &x.Extensions) &&
		unmarshalU16List(p, &x.Proposals) &&
		unmarshalU16List(p, &x.Credentials)
}

// Lifetime bounds the validity of a KeyPackage's leaf, in seconds since the
// Unix epoch (Section 7.2).
type Lifetime struct {
	NotBefore uint64
	NotAfter  uint64
}

func (x *Lifetime) marshal(b *builder) {
	b.u64(x.NotBefore)
	b.u64(x.NotAfter)
}

func (x *Lifetime) unmarshal(p *parser) bool {
	return p.u64(&x.NotBefore) && p.u64(&x.NotAfter)
}

// LeafNodeSource says how a LeafNode was created (Section 7.2).
type LeafNodeSource uint8

const (
	LeafNodeSourceKeyPackage LeafNodeSource = 1
	LeafNodeSourceUpdate     LeafNodeSource = 2
	LeafNodeSourceCommit     LeafNodeSource = 3
)

// LeafNode describes one member of the group, signed by that member
// (Section 7.2). EncryptionKey is an HPKEPublicKey and SignatureKey a
// SignaturePublicKey, both opaque<V>.
//
//	struct {
//	    HPKEPublicKey encryption_key;
//	    SignaturePublicKey signature_key;
//	    Credential credential;
//	    Capabilities capabilities;
//	    LeafNodeSource leaf_node_source;
//	    select (LeafNode.leaf_node_source) {
//	        case key_package: Lifetime lifetime;
//	        case update:      struct{};
//	        case commit:      opaque parent_hash<V>;
//	    };
//	    Extension extensions<V>;
//	    opaque signature<V>;
//	} LeafNode;
type LeafNode struct {
	EncryptionKey  []byte
	SignatureKey   []byte
	Credential     Credential
	Capabilities   Capabilities
	LeafNodeSource LeafNodeSource
	Lifetime       Lifetime // key_package only
	ParentHash     []byte   // commit only
	Extensions     []Extension
	Signature      []byte
}

// marshalContent appends the fields shared by LeafNode and LeafNodeTBS.
func (x *LeafNode) marshalContent(b *builder) {
	b.vec(x.EncryptionKey)
	b.vec(x.SignatureKey)
	x.Credential.marshal(b)
	x.Capabilities.marshal(b)
	b.u8(uint8(x.LeafNodeSource))
	switch x.LeafNodeSource {
	case LeafNodeSourceKeyPackage:
		x.Lifetime.marshal(b)
	case LeafNodeSourceCommit:
		b.vec(x.ParentHash)
	}
	marshalList(b, x.Extensions)
}

func (x *LeafNode) marshal(b *builder) {
	x.marshalContent(b)
	b.vec(x.Signature)
}

func (x *LeafNode) unmarshal(p *parser) bool {
	*x = LeafNode{}
	var src uint8
	if !p.vec(&x.EncryptionKey) || !p.vec(&x.SignatureKey) ||
		!x.Credential.unmarshal(p) || !x.Capabilities.unmarshal(p) || !p.u8(&src) {
		return false
	}
	x.LeafNodeSource = LeafNodeSource(src)
	switch x.LeafNodeSource {
	case LeafNodeSourceKeyPackage:
		if !x.Lifetime.unmarshal(p) {
			return false
		}
	case LeafNodeSourceUpdate:
	case LeafNodeSourceCommit:
		if !p.vec(&x.ParentHash) {
			return false
		}
	default:
		return false
	}
	return unmarshalList(p, &x.Extensions) && p.vec(&x.Signature)
}

// tbs returns the encoded LeafNodeTBS (Section 7.2): the leaf without its
// signature, followed for update and commit leaves by the group_id and
// leaf_index that bind the leaf to its place in one group.
func (x *LeafNode) tbs(groupID []byte, leafIndex uint32) []byte {
	var b builder
	x.marshalContent(&b)
	switch x.LeafNodeSource {
	case LeafNodeSourceUpdate, LeafNodeSourceCommit:
		b.vec(groupID)
		b.u32(leafIndex)
	}
	return b.bytes()
}

// sign sets the signature: SignWithLabel(., "LeafNodeTBS", LeafNodeTBS).
// groupID and leafIndex are ignored for key_package leaves.
func (x *LeafNode) sign(s suite, priv, groupID []byte, leafIndex uint32) error {
	sig, err := signWithLabel(s, priv, "LeafNodeTBS", x.tbs(groupID, leafIndex))
	if err != nil {
		return err
	}
	x.Signature = sig
	return nil
}

// verifySignature checks the signature with the leaf's own signature key
// (Section 7.3).
func (x *LeafNode) verifySignature(s suite, groupID []byte, leafIndex uint32) bool {
	return verifyWithLabel(s, x.SignatureKey, "LeafNodeTBS", x.tbs(groupID, leafIndex), x.Signature)
}

// KeyPackage is a signed offer to join groups (Section 10). InitKey is an
// HPKEPublicKey.
//
//	struct {
//	    ProtocolVersion version;
//	    CipherSuite cipher_suite;
//	    HPKEPublicKey init_key;
//	    LeafNode leaf_node;
//	    Extension extensions<V>;
//	    opaque signature<V>;
//	} KeyPackage;
type KeyPackage struct {
	Version     ProtocolVersion
	CipherSuite CipherSuite
	InitKey     []byte
	LeafNode    LeafNode
	Extensions  []Extension
	Signature   []byte
}

// marshalTBS appends KeyPackageTBS: every field but the signature.
func (x *KeyPackage) marshalTBS(b *builder) {
	b.u16(uint16(x.Version))
	b.u16(uint16(x.CipherSuite))
	b.vec(x.InitKey)
	x.LeafNode.marshal(b)
	marshalList(b, x.Extensions)
}

func (x *KeyPackage) marshal(b *builder) {
	x.marshalTBS(b)
	b.vec(x.Signature)
}

func (x *KeyPackage) unmarshal(p *parser) bool {
	*x = KeyPackage{}
	var v, cs uint16
	if !p.u16(&v) || !p.u16(&cs) {
		return false
	}
	x.Version, x.CipherSuite = ProtocolVersion(v), CipherSuite(cs)
	return p.vec(&x.InitKey) && x.LeafNode.unmarshal(p) &&
		unmarshalList(p, &x.Extensions) && p.vec(&x.Signature)
}

func (x *KeyPackage) tbs() []byte {
	var b builder
	x.marshalTBS(&b)
	return b.bytes()
}

// sign sets the signature: SignWithLabel(., "KeyPackageTBS", KeyPackageTBS)
// with the leaf's signature key (Section 10). The leaf must be signed first.
func (x *KeyPackage) sign(s suite, priv []byte) error {
	sig, err := signWithLabel(s, priv, "KeyPackageTBS", x.tbs())
	if err != nil {
		return err
	}
	x.Signature = sig
	return nil
}

// verifySignatures checks the KeyPackage signature and the signature of its
// LeafNode, both under leaf_node.signature_key (Section 10.1). It does not
// check the rest of the validation rules.
func (x *KeyPackage) verifySignatures(s suite) error {
	if x.CipherSuite != s.id() {
		return errors.New("mls: key package cipher suite mismatch")
	}
	if x.LeafNode.LeafNodeSource != LeafNodeSourceKeyPackage {
		return errors.New("mls: key package leaf node source is not key_package")
	}
	if !x.LeafNode.verifySignature(s, nil, 0) {
		return errors.New("mls: invalid leaf node signature")
	}
	if !verifyWithLabel(s, x.LeafNode.SignatureKey, "KeyPackageTBS", x.tbs(), x.Signature) {
		return errors.New("mls: invalid key package signature")
	}
	return nil
}

// ref returns the KeyPackageRef of x (Section 5.2).
func (x *KeyPackage) ref(s suite) []byte {
	return makeKeyPackageRef(s, marshal(x))
}

// generateKeyPackage creates a KeyPackage for suite s (Section 10): it
// draws fresh HPKE key pairs for init_key and the leaf's encryption_key,
// fills the capabilities with what this package supports plus the
// non-default types of leafExts, and signs the leaf and then the package
// with sigPriv. It returns the KeyPackage and the two HPKE private keys.
func generateKeyPackage(s suite, cred Credential, sigPriv []byte, lifetime Lifetime, exts, leafExts []Extension) (kp *KeyPackage, initPriv, encPriv []byte, err error) {
	// Parse the signature key once for both signatures.
	sk, err := s.signKey(sigPriv)
	if err != nil {
		return nil, nil, nil, err
	}
	initPriv, initPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		return nil, nil, nil, err
	}
	encPriv, encPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		return nil, nil, nil, err
	}
	caps := Capabilities{
		Versions:     []ProtocolVersion{ProtocolVersionMLS10},
		CipherSuites: []CipherSuite{s.id()},
		Credentials:  []CredentialType{cred.CredentialType},
	}
	for _, e := range leafExts {
		if !isDefaultExtension(e.ExtensionType) {
			caps.Extensions = append(caps.Extensions, e.ExtensionType)
		}
	}
	kp = &KeyPackage{
		Version:     ProtocolVersionMLS10,
		CipherSuite: s.id(),
		InitKey:     initPub,
		LeafNode: LeafNode{
			EncryptionKey:  encPub,
			SignatureKey:   sk.public(),
			Credential:     cred,
			Capabilities:   caps,
			LeafNodeSource: LeafNodeSourceKeyPackage,
			Lifetime:       lifetime,
			Extensions:     leafExts,
		},
		Extensions: exts,
	}
	if err := kp.signWithLeaf(sk); err != nil {
		return nil, nil, nil, err
	}
	return kp, initPriv, encPriv, nil
}

// signWithLeaf signs the key_package LeafNode and then the KeyPackage with
// sk, the key matching leaf_node.signature_key (Sections 7.2 and 10).
func (x *KeyPackage) signWithLeaf(sk signingKey) error {
	sig, err := sk.sign(signContent("LeafNodeTBS", x.LeafNode.tbs(nil, 0)))
	if err != nil {
		return err
	}
	x.LeafNode.Signature = sig
	if x.Signature, err = sk.sign(signContent("KeyPackageTBS", x.tbs())); err != nil {
		return err
	}
	return nil
}

// validate checks the parts of KeyPackage validation (Section 10.1) that do
// not depend on a group: version, cipher suite, both signatures, that
// init_key differs from the leaf's encryption_key, that the leaf's
// credential type and non-default extensions are listed in its
// capabilities (Sections 7.2 and 7.3), that no
// extension list repeats a type (Section 13), and, when now is not zero,
// the lifetime. The group-dependent checks of Section 7.3 (required
// capabilities, credential types in use, uniqueness of keys) are left to
// the caller.
func (x *KeyPackage) validate(s suite, now time.Time) error {
	if x.Version != ProtocolVersionMLS10 {
		return errors.New("mls: key package version is not mls10")
	}
	if err := x.verifySignatures(s); err != nil {
		return err
	}
	if bytes.Equal(x.InitKey, x.LeafNode.EncryptionKey) {
		return errors.New("mls: key package init_key equals the leaf encryption_key")
	}
	if hasDuplicateExtensions(x.Extensions) || hasDuplicateExtensions(x.LeafNode.Extensions) {
		return errors.New("mls: duplicate extension type")
	}
	caps := &x.LeafNode.Capabilities
	if !slices.Contains(caps.Credentials, x.LeafNode.Credential.CredentialType) {
		return errors.New("mls: leaf credential type not listed in capabilities")
	}
	for _, e := range x.LeafNode.Extensions {
		if !isDefaultExtension(e.ExtensionType) && !slices.Contains(caps.Extensions, e.ExtensionType) {
			return fmt.Errorf("mls: leaf extension 0x%04x not listed in capabilities", e.ExtensionType)
		}
	}
	if !now.IsZero() && !x.LeafNode.Lifetime.contains(now) {
		return errors.New("mls: key package outside its lifetime")
	}
	return nil
}

// contains reports whether t lies within the lifetime, bounds included.
func (x *Lifetime) contains(t time.Time) bool {
	if t.Unix() < 0 {
		return false
	}
	u := uint64(t.Unix())
	return x.NotBefore <= u && u <= x.NotAfter
}
