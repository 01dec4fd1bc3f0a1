package mls

// ExtensionType identifies an extension (RFC 9420, Section 13 and the "MLS
// Extension Types" registry, Section 17.3). Unknown types, GREASE among
// them, are carried as opaque data.
type ExtensionType = uint16

// Extension types registered by RFC 9420, Section 17.3.
const (
	ExtensionTypeApplicationID        ExtensionType = 0x0001
	ExtensionTypeRatchetTree          ExtensionType = 0x0002
	ExtensionTypeRequiredCapabilities ExtensionType = 0x0003
	ExtensionTypeExternalPub          ExtensionType = 0x0004
	ExtensionTypeExternalSenders      ExtensionType = 0x0005
)

// Extension is one extension in a list (Section 13):
//
//	struct {
//	    ExtensionType extension_type;
//	    opaque extension_data<V>;
//	} Extension;
type Extension struct {
	ExtensionType ExtensionType
	ExtensionData []byte
}

func (x *Extension) marshal(b *builder) {
	b.u16(x.ExtensionType)
	b.vec(x.ExtensionData)
}

func (x *Extension) unmarshal(p *parser) bool {
	return p.u16(&x.ExtensionType) && p.vec(&x.ExtensionData)
}

// findExtension returns the data of the first extension of type t.
func findExtension(exts []Extension, t ExtensionType) ([]byte, bool) {
	for _, e := range exts {
		if e.ExtensionType == t {
			return e.ExtensionData, true
		}
	}
	return nil, false
}

// hasDuplicateExtensions reports whether exts holds two extensions of the
// same type, which Section 13.4 forbids in any extension list. It runs for
// every received leaf and every restored epoch, so the short lists that
// occur in practice are compared pairwise, without allocating.
func hasDuplicateExtensions(exts []Extension) bool {
	if len(exts) <= 16 {
		for i := 1; i < len(exts); i++ {
			for j := range i {
				if exts[i].ExtensionType == exts[j].ExtensionType {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[ExtensionType]bool, len(exts))
	for _, e := range exts {
		if seen[e.ExtensionType] {
			return true
		}
		seen[e.ExtensionType] = true
	}
	return false
}

// ApplicationID is the data of the application_id extension (Section
// 5.3.3): opaque application_id<V>.
type ApplicationID struct {
	ApplicationID []byte
}

func (x *ApplicationID) marshal(b *builder) { b.vec(x.ApplicationID) }

func (x *ApplicationID) unmarshal(p *parser) bool { return p.vec(&x.ApplicationID) }

// requiredCapabilities is the data of the required_capabilities extension
// (Section 11.1).
//
//	struct {
//	    ExtensionType extension_types<V>;
//	    ProposalType proposal_types<V>;
//	    CredentialType credential_types<V>;
//	} RequiredCapabilities;
type requiredCapabilities struct {
	ExtensionTypes  []ExtensionType
	ProposalTypes   []ProposalType
	CredentialTypes []CredentialType
}

func (x *requiredCapabilities) marshal(b *builder) {
	marshalU16List(b, x.ExtensionTypes)
	marshalU16List(b, x.ProposalTypes)
	marshalU16List(b, x.CredentialTypes)
}

func (x *requiredCapabilities) unmarshal(p *parser) bool {
	return unmarshalU16List(p, &x.ExtensionTypes) &&
		unmarshalU16List(p, &x.ProposalTypes) &&
		unmarshalU16List(p, &x.CredentialTypes)
}

// ExternalPub is the data of the external_pub extension (Section 12.4.3.2).
//
//	struct { HPKEPublicKey external_pub; } ExternalPub;
type ExternalPub struct {
	ExternalPub []byte
}

func (x *ExternalPub) marshal(b *builder) { b.vec(x.ExternalPub) }

func (x *ExternalPub) unmarshal(p *parser) bool { return p.vec(&x.ExternalPub) }

// ExternalSender is one entry of the external_senders extension (Section
// 12.1.8.1).
//
//	struct {
//	    SignaturePublicKey signature_key;
//	    Credential credential;
//	} ExternalSender;
type ExternalSender struct {
	SignatureKey []byte
	Credential   Credential
}

func (x *ExternalSender) marshal(b *builder) {
	b.vec(x.SignatureKey)
	x.Credential.marshal(b)
}

func (x *ExternalSender) unmarshal(p *parser) bool {
	return p.vec(&x.SignatureKey) && x.Credential.unmarshal(p)
}

// externalSenders is the data of the external_senders extension:
// ExternalSender external_senders<V>.
type externalSenders struct {
	Senders []ExternalSender
}

func (x *externalSenders) marshal(b *builder) { marshalList(b, x.Senders) }

func (x *externalSenders) unmarshal(p *parser) bool { return unmarshalList(p, &x.Senders) }
