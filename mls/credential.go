package mls

// CredentialType identifies the kind of a Credential (RFC 9420, Section 5.3
// and the "MLS Credential Types" registry, Section 17.5).
type CredentialType uint16

const (
	CredentialTypeBasic CredentialType = 1
	CredentialTypeX509  CredentialType = 2
)

// Credential binds an identity to a signature key (Section 5.3).
//
//	struct {
//	    CredentialType credential_type;
//	    select (Credential.credential_type) {
//	        case basic: opaque identity<V>;
//	        case x509:  Certificate certificates<V>;
//	    };
//	} Credential;
//
// Decoding rejects credential types other than basic and x509, whose
// encoding this package cannot know.
type Credential struct {
	CredentialType CredentialType
	Identity       []byte   // basic
	Certificates   [][]byte // x509: DER certificates, end entity first
}

func (x *Credential) marshal(b *builder) {
	b.u16(uint16(x.CredentialType))
	switch x.CredentialType {
	case CredentialTypeBasic:
		b.vec(x.Identity)
	case CredentialTypeX509:
		// struct { opaque cert_data<V>; } Certificate;
		marshalOpaqueList(b, x.Certificates)
	}
}

func (x *Credential) unmarshal(p *parser) bool {
	*x = Credential{}
	var t uint16
	if !p.u16(&t) {
		return false
	}
	x.CredentialType = CredentialType(t)
	switch x.CredentialType {
	case CredentialTypeBasic:
		return p.vec(&x.Identity)
	case CredentialTypeX509:
		return unmarshalOpaqueList(p, &x.Certificates)
	}
	return false
}
