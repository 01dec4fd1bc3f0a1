package mls

// pathSecretMsg (the RFC's PathSecret) carries a path secret to a joiner (RFC 9420, Section 12.4.3.1).
type pathSecretMsg struct {
	PathSecret []byte
}

func (x *pathSecretMsg) marshal(b *builder)       { b.vec(x.PathSecret) }
func (x *pathSecretMsg) unmarshal(p *parser) bool { return p.vec(&x.PathSecret) }

// welcomeSecrets (the RFC's GroupSecrets) is what a Welcome encrypts to each new member (Section
// 12.4.3.1).
//
//	struct {
//	  opaque joiner_secret<V>;
//	  optional<PathSecret> path_secret;
//	  PreSharedKeyID psks<V>;
//	} GroupSecrets;
type welcomeSecrets struct {
	JoinerSecret []byte
	PathSecret   *pathSecretMsg
	PSKs         []PreSharedKeyID
}

func (x *welcomeSecrets) marshal(b *builder) {
	b.vec(x.JoinerSecret)
	b.optional(x.PathSecret != nil, func(b *builder) { x.PathSecret.marshal(b) })
	marshalList(b, x.PSKs)
}

func (x *welcomeSecrets) unmarshal(p *parser) bool {
	*x = welcomeSecrets{}
	if !p.vec(&x.JoinerSecret) {
		return false
	}
	var ps pathSecretMsg
	present, ok := p.optional(ps.unmarshal)
	if !ok {
		return false
	}
	if present {
		x.PathSecret = &ps
	}
	return unmarshalList(p, &x.PSKs)
}

// encryptedGroupSecrets is the GroupSecrets for the member whose
// KeyPackageRef is NewMember (Section 12.4.3.1).
type encryptedGroupSecrets struct {
	NewMember             []byte
	EncryptedGroupSecrets hpkeCiphertext
}

func (x *encryptedGroupSecrets) marshal(b *builder) {
	b.vec(x.NewMember)
	x.EncryptedGroupSecrets.marshal(b)
}

func (x *encryptedGroupSecrets) unmarshal(p *parser) bool {
	return p.vec(&x.NewMember) && x.EncryptedGroupSecrets.unmarshal(p)
}

// welcomeMessage (the RFC's Welcome) brings new members into the group (Section 12.4.3.1).
//
//	struct {
//	  CipherSuite cipher_suite;
//	  EncryptedGroupSecrets secrets<V>;
//	  opaque encrypted_group_info<V>;
//	} Welcome;
type welcomeMessage struct {
	CipherSuite        CipherSuite
	Secrets            []encryptedGroupSecrets
	EncryptedGroupInfo []byte
}

func (x *welcomeMessage) marshal(b *builder) {
	b.u16(uint16(x.CipherSuite))
	marshalList(b, x.Secrets)
	b.vec(x.EncryptedGroupInfo)
}

func (x *welcomeMessage) unmarshal(p *parser) bool {
	*x = welcomeMessage{}
	var cs uint16
	if !p.u16(&cs) {
		return false
	}
	x.CipherSuite = CipherSuite(cs)
	return unmarshalList(p, &x.Secrets) && p.vec(&x.EncryptedGroupInfo)
}
