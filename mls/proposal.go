package mls

// ProposalType identifies a proposal (RFC 9420, Section 12.1 and the "MLS
// Proposal Types" registry, Section 17.4).
type ProposalType uint16

const (
	ProposalTypeAdd                    ProposalType = 0x0001
	ProposalTypeUpdate                 ProposalType = 0x0002
	ProposalTypeRemove                 ProposalType = 0x0003
	ProposalTypePSK                    ProposalType = 0x0004
	ProposalTypeReInit                 ProposalType = 0x0005
	ProposalTypeExternalInit           ProposalType = 0x0006
	ProposalTypeGroupContextExtensions ProposalType = 0x0007
)

// Proposal is a proposed change to the group (Section 12.1). Exactly the
// field named by ProposalType is used; a nil field encodes as its zero
// value. Decoding rejects proposal types this package does not know,
// since their encoding is unknown (GREASE values must not be sent here,
// Section 13.5).
type Proposal struct {
	ProposalType           ProposalType
	Add                    *Add
	Update                 *Update
	Remove                 *Remove
	PreSharedKey           *PreSharedKey
	ReInit                 *ReInit
	ExternalInit           *ExternalInit
	GroupContextExtensions *GroupContextExtensions
}

func orZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

func (x *Proposal) marshal(b *builder) {
	b.u16(uint16(x.ProposalType))
	switch x.ProposalType {
	case ProposalTypeAdd:
		orZero(x.Add).marshal(b)
	case ProposalTypeUpdate:
		orZero(x.Update).marshal(b)
	case ProposalTypeRemove:
		orZero(x.Remove).marshal(b)
	case ProposalTypePSK:
		orZero(x.PreSharedKey).marshal(b)
	case ProposalTypeReInit:
		orZero(x.ReInit).marshal(b)
	case ProposalTypeExternalInit:
		orZero(x.ExternalInit).marshal(b)
	case ProposalTypeGroupContextExtensions:
		orZero(x.GroupContextExtensions).marshal(b)
	}
}

func (x *Proposal) unmarshal(p *parser) bool {
	*x = Proposal{}
	var t uint16
	if !p.u16(&t) {
		return false
	}
	x.ProposalType = ProposalType(t)
	switch x.ProposalType {
	case ProposalTypeAdd:
		x.Add = new(Add)
		return x.Add.unmarshal(p)
	case ProposalTypeUpdate:
		x.Update = new(Update)
		return x.Update.unmarshal(p)
	case ProposalTypeRemove:
		x.Remove = new(Remove)
		return x.Remove.unmarshal(p)
	case ProposalTypePSK:
		x.PreSharedKey = new(PreSharedKey)
		return x.PreSharedKey.unmarshal(p)
	case ProposalTypeReInit:
		x.ReInit = new(ReInit)
		return x.ReInit.unmarshal(p)
	case ProposalTypeExternalInit:
		x.ExternalInit = new(ExternalInit)
		return x.ExternalInit.unmarshal(p)
	case ProposalTypeGroupContextExtensions:
		x.GroupContextExtensions = new(GroupContextExtensions)
		return x.GroupContextExtensions.unmarshal(p)
	}
	return false
}

// Add asks to add the owner of KeyPackage (Section 12.1.1).
type Add struct {
	KeyPackage KeyPackage
}

func (x *Add) marshal(b *builder)       { x.KeyPackage.marshal(b) }
func (x *Add) unmarshal(p *parser) bool { return x.KeyPackage.unmarshal(p) }

// Update replaces the sender's leaf (Section 12.1.2).
type Update struct {
	LeafNode LeafNode
}

func (x *Update) marshal(b *builder)       { x.LeafNode.marshal(b) }
func (x *Update) unmarshal(p *parser) bool { return x.LeafNode.unmarshal(p) }

// Remove asks to remove the member at leaf index Removed (Section 12.1.3).
type Remove struct {
	Removed uint32
}

func (x *Remove) marshal(b *builder)       { b.u32(x.Removed) }
func (x *Remove) unmarshal(p *parser) bool { return p.u32(&x.Removed) }

// PSKType is the kind of a pre-shared key (Section 8.4).
type PSKType uint8

const (
	PSKTypeExternal   PSKType = 1
	PSKTypeResumption PSKType = 2
)

// ResumptionPSKUsage says why a resumption PSK is used (Section 8.4).
type ResumptionPSKUsage uint8

const (
	ResumptionPSKUsageApplication ResumptionPSKUsage = 1
	ResumptionPSKUsageReInit      ResumptionPSKUsage = 2
	ResumptionPSKUsageBranch      ResumptionPSKUsage = 3
)

// PreSharedKeyID names a pre-shared key (Section 8.4).
//
//	struct {
//	  PSKType psktype;
//	  select (PreSharedKeyID.psktype) {
//	    case external:   opaque psk_id<V>;
//	    case resumption: ResumptionPSKUsage usage;
//	                     opaque psk_group_id<V>;
//	                     uint64 psk_epoch;
//	  };
//	  opaque psk_nonce<V>;
//	} PreSharedKeyID;
//
// Decoding rejects the reserved value 0 and unknown values of both enums.
type PreSharedKeyID struct {
	PSKType    PSKType
	PSKID      []byte             // external
	Usage      ResumptionPSKUsage // resumption
	PSKGroupID []byte             // resumption
	PSKEpoch   uint64             // resumption
	PSKNonce   []byte
}

func (x *PreSharedKeyID) marshal(b *builder) {
	b.u8(uint8(x.PSKType))
	switch x.PSKType {
	case PSKTypeExternal:
		b.vec(x.PSKID)
	case PSKTypeResumption:
		b.u8(uint8(x.Usage))
		b.vec(x.PSKGroupID)
		b.u64(x.PSKEpoch)
	}
	b.vec(x.PSKNonce)
}

func (x *PreSharedKeyID) unmarshal(p *parser) bool {
	*x = PreSharedKeyID{}
	var t uint8
	if !p.u8(&t) {
		return false
	}
	x.PSKType = PSKType(t)
	switch x.PSKType {
	case PSKTypeExternal:
		if !p.vec(&x.PSKID) {
			return false
		}
	case PSKTypeResumption:
		var u uint8
		if !p.u8(&u) || u < 1 || u > 3 {
			return false
		}
		x.Usage = ResumptionPSKUsage(u)
		if !p.vec(&x.PSKGroupID) || !p.u64(&x.PSKEpoch) {
			return false
		}
	default:
		return false
	}
	return p.vec(&x.PSKNonce)
}

// PreSharedKey asks to inject a PSK into the next epoch (Section 12.1.4).
type PreSharedKey struct {
	PSK PreSharedKeyID
}

func (x *PreSharedKey) marshal(b *builder)       { x.PSK.marshal(b) }
func (x *PreSharedKey) unmarshal(p *parser) bool { return x.PSK.unmarshal(p) }

// ReInit asks to reinitialize the group with new parameters (Section
// 12.1.5).
type ReInit struct {
	GroupID     []byte
	Version     ProtocolVersion
	CipherSuite CipherSuite
	Extensions  []Extension
}

func (x *ReInit) marshal(b *builder) {
	b.vec(x.GroupID)
	b.u16(uint16(x.Version))
	b.u16(uint16(x.CipherSuite))
	marshalList(b, x.Extensions)
}

func (x *ReInit) unmarshal(p *parser) bool {
	var v, cs uint16
	if !p.vec(&x.GroupID) || !p.u16(&v) || !p.u16(&cs) {
		return false
	}
	x.Version, x.CipherSuite = ProtocolVersion(v), CipherSuite(cs)
	return unmarshalList(p, &x.Extensions)
}

// ExternalInit carries the KEM output of an external join (Section
// 12.1.6).
type ExternalInit struct {
	KEMOutput []byte
}

func (x *ExternalInit) marshal(b *builder)       { b.vec(x.KEMOutput) }
func (x *ExternalInit) unmarshal(p *parser) bool { return p.vec(&x.KEMOutput) }

// GroupContextExtensions replaces the group's extensions (Section 12.1.7).
type GroupContextExtensions struct {
	Extensions []Extension
}

func (x *GroupContextExtensions) marshal(b *builder) { marshalList(b, x.Extensions) }
func (x *GroupContextExtensions) unmarshal(p *parser) bool {
	return unmarshalList(p, &x.Extensions)
}

// proposalOrRefType says whether a Commit carries a proposal or a reference
// to one (Section 12.4).
type proposalOrRefType uint8

const (
	porProposal  proposalOrRefType = 1
	porReference proposalOrRefType = 2
)

// proposalOrRef is a proposal in a Commit, by value or by ProposalRef
// (Section 12.4).
type proposalOrRef struct {
	Type      proposalOrRefType
	Proposal  Proposal // proposal
	Reference []byte   // reference: a ProposalRef, opaque<V>
}

func (x *proposalOrRef) marshal(b *builder) {
	b.u8(uint8(x.Type))
	switch x.Type {
	case porProposal:
		x.Proposal.marshal(b)
	case porReference:
		b.vec(x.Reference)
	}
}

func (x *proposalOrRef) unmarshal(p *parser) bool {
	*x = proposalOrRef{}
	var t uint8
	if !p.u8(&t) {
		return false
	}
	x.Type = proposalOrRefType(t)
	switch x.Type {
	case porProposal:
		return x.Proposal.unmarshal(p)
	case porReference:
		return p.vec(&x.Reference)
	}
	return false
}
