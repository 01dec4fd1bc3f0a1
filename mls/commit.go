package mls

// Commit applies proposals and optionally refreshes the committer's path
// (RFC 9420, Section 12.4).
//
//	struct {
//	    ProposalOrRef proposals<V>;
//	    optional<UpdatePath> path;
//	} Commit;
type Commit struct {
	Proposals []ProposalOrRef
	Path      *UpdatePath
}

func (x *Commit) marshal(b *builder) {
	marshalList(b, x.Proposals)
	b.optional(x.Path != nil, func(b *builder) { x.Path.marshal(b) })
}

func (x *Commit) unmarshal(p *parser) bool {
	*x = Commit{}
	if !unmarshalList(p, &x.Proposals) {
		return false
	}
	var path UpdatePath
	present, ok := p.optional(path.unmarshal)
	if present {
		x.Path = &path
	}
	return ok
}

// HPKECiphertext is the output of EncryptWithLabel (Section 7.6).
type HPKECiphertext struct {
	KEMOutput  []byte
	Ciphertext []byte
}

func (x *HPKECiphertext) marshal(b *builder) {
	b.vec(x.KEMOutput)
	b.vec(x.Ciphertext)
}

func (x *HPKECiphertext) unmarshal(p *parser) bool {
	return p.vec(&x.KEMOutput) && p.vec(&x.Ciphertext)
}

// UpdatePathNode is one parent node of an UpdatePath: its new public key
// and its path secret encrypted to each node of the copath resolution
// (Section 7.6).
type UpdatePathNode struct {
	EncryptionKey       []byte
	EncryptedPathSecret []HPKECiphertext
}

func (x *UpdatePathNode) marshal(b *builder) {
	b.vec(x.EncryptionKey)
	marshalList(b, x.EncryptedPathSecret)
}

func (x *UpdatePathNode) unmarshal(p *parser) bool {
	return p.vec(&x.EncryptionKey) && unmarshalList(p, &x.EncryptedPathSecret)
}

// UpdatePath is the committer's new leaf and the new parent nodes of its
// filtered direct path (Section 7.6).
type UpdatePath struct {
	LeafNode LeafNode
	Nodes    []UpdatePathNode
}

func (x *UpdatePath) marshal(b *builder) {
	x.LeafNode.marshal(b)
	marshalList(b, x.Nodes)
}

func (x *UpdatePath) unmarshal(p *parser) bool {
	return x.LeafNode.unmarshal(p) && unmarshalList(p, &x.Nodes)
}
