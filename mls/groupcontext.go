package mls

// GroupContext summarizes the state of the group in one epoch (RFC 9420,
// Section 8.1). Decoding rejects versions other than mls10.
//
//	struct {
//	    ProtocolVersion version = mls10;
//	    CipherSuite cipher_suite;
//	    opaque group_id<V>;
//	    uint64 epoch;
//	    opaque tree_hash<V>;
//	    opaque confirmed_transcript_hash<V>;
//	    Extension extensions<V>;
//	} GroupContext;
type GroupContext struct {
	Version                 ProtocolVersion
	CipherSuite             CipherSuite
	GroupID                 []byte
	Epoch                   uint64
	TreeHash                []byte
	ConfirmedTranscriptHash []byte
	Extensions              []Extension
}

func (x *GroupContext) marshal(b *builder) {
	b.u16(uint16(x.Version))
	b.u16(uint16(x.CipherSuite))
	b.vec(x.GroupID)
	b.u64(x.Epoch)
	b.vec(x.TreeHash)
	b.vec(x.ConfirmedTranscriptHash)
	marshalList(b, x.Extensions)
}

func (x *GroupContext) unmarshal(p *parser) bool {
	*x = GroupContext{}
	var v, cs uint16
	if !p.u16(&v) || !p.u16(&cs) {
		return false
	}
	x.Version, x.CipherSuite = ProtocolVersion(v), CipherSuite(cs)
	// The version is fixed to mls10 by the structure definition.
	if x.Version != ProtocolVersionMLS10 {
		return false
	}
	return p.vec(&x.GroupID) && p.u64(&x.Epoch) && p.vec(&x.TreeHash) &&
		p.vec(&x.ConfirmedTranscriptHash) && unmarshalList(p, &x.Extensions)
}
