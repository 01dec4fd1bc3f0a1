package mls

// commitContent (the RFC's Commit) applies proposals and optionally refreshes the committer's path
// (RFC 9420, Section 12.4).
//
//	struct {
//	    ProposalOrRef proposals<V>;
//	    optional<UpdatePath> path;
//	} Commit;
type commitContent struct {
	Proposals []proposalOrRef
	Path      *updatePath
}

func (x *commitContent) marshal(b *builder) {
	marshalList(b, x.Proposals)
	b.optional(x.Path != nil, func(b *builder) { x.Path.marshal(b) })
}

func (x *commitContent) unmarshal(p *parser) bool {
	*x = commitContent{}
	if !unmarshalList(p, &x.Proposals) {
		return false
	}
	var path updatePath
	present, ok := p.optional(path.unmarshal)
	if present {
		x.Path = &path
	}
	return ok
}

// hpkeCiphertext is the output of EncryptWithLabel (Section 7.6).
type hpkeCiphertext struct {
	KEMOutput  []byte
	Ciphertext []byte
}

func (x *hpkeCiphertext) marshal(b *builder) {
	b.vec(x.KEMOutput)
	b.vec(x.Ciphertext)
}

func (x *hpkeCiphertext) unmarshal(p *parser) bool {
	return p.vec(&x.KEMOutput) && p.vec(&x.Ciphertext)
}

// updatePathNode is one parent node of an UpdatePath: its new public key
// and its path secret encrypted to each node of the copath resolution
// (Section 7.6).
type updatePathNode struct {
	EncryptionKey       []byte
	EncryptedPathSecret []hpkeCiphertext
}

func (x *updatePathNode) marshal(b *builder) {
	b.vec(x.EncryptionKey)
	marshalList(b, x.EncryptedPathSecret)
}

func (x *updatePathNode) unmarshal(p *parser) bool {
	return p.vec(&x.EncryptionKey) && unmarshalList(p, &x.EncryptedPathSecret)
}

// updatePath is the committer's new leaf and the new parent nodes of its
// filtered direct path (Section 7.6).
type updatePath struct {
	LeafNode LeafNode
	Nodes    []updatePathNode
}

func (x *updatePath) marshal(b *builder) {
	x.LeafNode.marshal(b)
	marshalList(b, x.Nodes)
}

func (x *updatePath) unmarshal(p *parser) bool {
	return x.LeafNode.unmarshal(p) && unmarshalList(p, &x.Nodes)
}
