package mls

// PathSecret carries a path secret to a joiner (RFC 9420, Section 12.4.3.1).
type PathSecret struct {
	PathSecret []byte
}

func (x *PathSecret) marshal(b *builder)       { b.vec(x.PathSecret) }
func (x *PathSecret) unmarshal(p *parser) bool { return p.vec(&x.PathSecret) }

// GroupSecrets is what a Welcome encrypts to each new member (Section
// 12.4.3.1).
//
//	struct {
//	  opaque joiner_secret<V>;
//	  optional<PathSecret> path_secret;
//	  PreSharedKeyID psks<V>;
//	} GroupSecrets;
type GroupSecrets struct {
	JoinerSecret []byte
	PathSecret   *PathSecret
	PSKs         []PreSharedKeyID
}

func (x *GroupSecrets) marshal(b *builder) {
	b.vec(x.JoinerSecret)
	b.optional(x.PathSecret != nil, func(b *builder) { x.PathSecret.marshal(b) })
	marshalList(b, x.PSKs)
}

func (x *GroupSecrets) unmarshal(p *parser) bool {
	*x = GroupSecrets{}
	if !p.vec(&x.JoinerSecret) {
		return false
	}
	var ps PathSecret
	present, ok := p.optional(ps.unmarshal)
	if !ok {
		return false
	}
	if present {
		x.PathSecret = &ps
	}
	return unmarshalList(p, &x.PSKs)
}

// EncryptedGroupSecrets is the GroupSecrets for the member whose
// KeyPackageRef is NewMember (Section 12.4.3.1).
type EncryptedGroupSecrets struct {
	NewMember             []byte
	EncryptedGroupSecrets HPKECiphertext
}

func (x *EncryptedGroupSecrets) marshal(b *builder) {
	b.vec(x.NewMember)
	x.EncryptedGroupSecrets.marshal(b)
}

func (x *EncryptedGroupSecrets) unmarshal(p *parser) bool {
	return p.vec(&x.NewMember) && x.EncryptedGroupSecrets.unmarshal(p)
}

// Welcome brings new members into the group (Section 12.4.3.1).
//
//	struct {
//	  CipherSuite cipher_suite;
//	  EncryptedGroupSecrets secrets<V>;
//	  opaque encrypted_group_info<V>;
//	} Welcome;
type Welcome struct {
	CipherSuite        CipherSuite
	Secrets            []EncryptedGroupSecrets
	EncryptedGroupInfo []byte
}

func (x *Welcome) marshal(b *builder) {
	b.u16(uint16(x.CipherSuite))
	marshalList(b, x.Secrets)
	b.vec(x.EncryptedGroupInfo)
}

func (x *Welcome) unmarshal(p *parser) bool {
	*x = Welcome{}
	var cs uint16
	if !p.u16(&cs) {
		return false
	}
	x.CipherSuite = CipherSuite(cs)
	return unmarshalList(p, &x.Secrets) && p.vec(&x.EncryptedGroupInfo)
}
