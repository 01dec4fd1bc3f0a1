package mls

// GroupInfo describes the group to joiners (RFC 9420, Section 12.4.3).
//
//	struct {
//	    GroupContext group_context;
//	    Extension extensions<V>;
//	    MAC confirmation_tag;
//	    uint32 signer;
//	    opaque signature<V>;
//	} GroupInfo;
type GroupInfo struct {
	GroupContext    GroupContext
	Extensions      []Extension
	ConfirmationTag []byte
	Signer          uint32
	Signature       []byte
}

// marshalTBS appends GroupInfoTBS: every field above the signature.
func (x *GroupInfo) marshalTBS(b *builder) {
	x.GroupContext.marshal(b)
	marshalList(b, x.Extensions)
	b.vec(x.ConfirmationTag)
	b.u32(x.Signer)
}

func (x *GroupInfo) marshal(b *builder) {
	x.marshalTBS(b)
	b.vec(x.Signature)
}

func (x *GroupInfo) unmarshal(p *parser) bool {
	*x = GroupInfo{}
	return x.GroupContext.unmarshal(p) && unmarshalList(p, &x.Extensions) &&
		p.vec(&x.ConfirmationTag) && p.u32(&x.Signer) && p.vec(&x.Signature)
}

func (x *GroupInfo) tbs() []byte {
	var b builder
	x.marshalTBS(&b)
	return b.bytes()
}

// sign sets the signature: SignWithLabel(., "GroupInfoTBS", GroupInfoTBS).
func (x *GroupInfo) sign(s suite, priv []byte) error {
	sig, err := signWithLabel(s, priv, "GroupInfoTBS", x.tbs())
	if err != nil {
		return err
	}
	x.Signature = sig
	return nil
}

// verifySignature checks the signature with pub, the signature key of the
// leaf at index Signer in the ratchet tree.
func (x *GroupInfo) verifySignature(s suite, pub []byte) bool {
	return verifyWithLabel(s, pub, "GroupInfoTBS", x.tbs(), x.Signature)
}
