package mls

import "errors"

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

// sizeHint is about the length of the leaf's encoding, so that encoders
// of large trees can allocate their buffers once: with the X-Wing suite a
// leaf is some 1,400 bytes.
func (x *LeafNode) sizeHint() int {
	n := 64 + len(x.EncryptionKey) + len(x.SignatureKey) + len(x.Credential.Identity) + len(x.ParentHash) + len(x.Signature)
	for _, c := range x.Credential.Certificates {
		n += len(c) + 4
	}
	c := &x.Capabilities
	n += 2 * (len(c.Versions) + len(c.CipherSuites) + len(c.Extensions) + len(c.Proposals) + len(c.Credentials))
	for _, e := range x.Extensions {
		n += len(e.ExtensionData) + 8
	}
	return n
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
	b := builder{b: make([]byte, 0, x.sizeHint()+len(groupID)+8)}
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
// (Section 7.3). Every received leaf passes through it (in a KeyPackage,
// an Update, an UpdatePath or a ratchet tree), so it first checks the
// leaf's public keys and extension list (keyvalidate.go): a leaf whose
// keys cannot be used is refused like one whose signature fails.
func (x *LeafNode) verifySignature(s suite, groupID []byte, leafIndex uint32) bool {
	if x.checkKeys(s) != nil {
		return false
	}
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
// LeafNode, both under leaf_node.signature_key (Section 10.1), after the
// public keys and extension lists of both (keyvalidate.go). It does not
// check the rest of the validation rules.
func (x *KeyPackage) verifySignatures(s suite) error {
	if x.CipherSuite != s.id() {
		return errors.New("mls: key package cipher suite mismatch")
	}
	if x.LeafNode.LeafNodeSource != LeafNodeSourceKeyPackage {
		return errors.New("mls: key package leaf node source is not key_package")
	}
	if err := x.checkKeys(s); err != nil {
		return err
	}
	if err := x.LeafNode.checkKeys(s); err != nil {
		return err
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
