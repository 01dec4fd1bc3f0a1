package mls

// This file holds the message framing structures of RFC 9420, Section 6.
// It only encodes and decodes; signing, MACs and encryption are elsewhere.

// ProtocolVersion is the MLS version (Section 6).
type ProtocolVersion uint16

// ProtocolVersionMLS10 is mls10, the version defined by RFC 9420.
const ProtocolVersionMLS10 ProtocolVersion = 1

// WireFormat says which message an MLSMessage carries (Section 6 and the
// "MLS Wire Formats" registry, Section 17.2).
type WireFormat uint16

const (
	WireFormatPublicMessage  WireFormat = 0x0001
	WireFormatPrivateMessage WireFormat = 0x0002
	WireFormatWelcome        WireFormat = 0x0003
	WireFormatGroupInfo      WireFormat = 0x0004
	WireFormatKeyPackage     WireFormat = 0x0005
)

// ContentType is the kind of content in a FramedContent (Section 6).
type ContentType uint8

const (
	ContentTypeApplication ContentType = 1
	ContentTypeProposal    ContentType = 2
	ContentTypeCommit      ContentType = 3
)

func (ct ContentType) valid() bool {
	return ct >= ContentTypeApplication && ct <= ContentTypeCommit
}

func (p *parser) contentType(ct *ContentType) bool {
	var v uint8
	if !p.u8(&v) {
		return false
	}
	*ct = ContentType(v)
	return ct.valid()
}

// SenderType is the kind of sender of a message (Section 6).
type SenderType uint8

const (
	SenderTypeMember            SenderType = 1
	SenderTypeExternal          SenderType = 2
	SenderTypeNewMemberProposal SenderType = 3
	SenderTypeNewMemberCommit   SenderType = 4
)

// Sender identifies who sent a message (Section 6).
//
//	struct {
//	    SenderType sender_type;
//	    select (Sender.sender_type) {
//	        case member:   uint32 leaf_index;
//	        case external: uint32 sender_index;
//	        case new_member_commit:
//	        case new_member_proposal: struct{};
//	    };
//	} Sender;
type Sender struct {
	SenderType  SenderType
	LeafIndex   uint32 // member
	SenderIndex uint32 // external: index into external_senders
}

func (x *Sender) marshal(b *builder) {
	b.u8(uint8(x.SenderType))
	switch x.SenderType {
	case SenderTypeMember:
		b.u32(x.LeafIndex)
	case SenderTypeExternal:
		b.u32(x.SenderIndex)
	}
}

func (x *Sender) unmarshal(p *parser) bool {
	*x = Sender{}
	var t uint8
	if !p.u8(&t) {
		return false
	}
	x.SenderType = SenderType(t)
	switch x.SenderType {
	case SenderTypeMember:
		return p.u32(&x.LeafIndex)
	case SenderTypeExternal:
		return p.u32(&x.SenderIndex)
	case SenderTypeNewMemberProposal, SenderTypeNewMemberCommit:
		return true
	}
	return false
}

// marshalContent appends the select on content_type shared by
// FramedContent and PrivateMessageContent.
func marshalContent(b *builder, ct ContentType, app []byte, prop *Proposal, commit *commitContent) {
	switch ct {
	case ContentTypeApplication:
		b.vec(app)
	case ContentTypeProposal:
		orZero(prop).marshal(b)
	case ContentTypeCommit:
		orZero(commit).marshal(b)
	}
}

func unmarshalContent(p *parser, ct ContentType, app *[]byte, prop **Proposal, commit **commitContent) bool {
	switch ct {
	case ContentTypeApplication:
		return p.vec(app)
	case ContentTypeProposal:
		*prop = new(Proposal)
		return (*prop).unmarshal(p)
	case ContentTypeCommit:
		*commit = new(commitContent)
		return (*commit).unmarshal(p)
	}
	return false
}

// framedContent is the content of a message with its framing (Section 6).
// The field named by ContentType is used; a nil Proposal or Commit
// encodes as its zero value.
type framedContent struct {
	GroupID           []byte
	Epoch             uint64
	Sender            Sender
	AuthenticatedData []byte
	ContentType       ContentType
	ApplicationData   []byte         // application
	Proposal          *Proposal      // proposal
	Commit            *commitContent // commit

	// body is the content as received (the encoding of ApplicationData,
	// Proposal or Commit), kept when a PrivateMessage is opened. The
	// signature (Section 6.1), the transcript hash (Section 8.2) and the
	// fields above all come from these bytes, so encoding reuses them
	// instead of re-encoding a commit that can be megabytes. Only the
	// receive path sets it, and nothing changes the content after that.
	body []byte
}

// encodedLen is about the length of x's encoding, for sizing buffers.
func (x *framedContent) encodedLen() int {
	return len(x.GroupID) + len(x.AuthenticatedData) + len(x.body) + 32
}

func (x *framedContent) marshal(b *builder) {
	b.vec(x.GroupID)
	b.u64(x.Epoch)
	x.Sender.marshal(b)
	b.vec(x.AuthenticatedData)
	b.u8(uint8(x.ContentType))
	if x.body != nil {
		b.raw(x.body)
		return
	}
	marshalContent(b, x.ContentType, x.ApplicationData, x.Proposal, x.Commit)
}

func (x *framedContent) unmarshal(p *parser) bool {
	*x = framedContent{}
	return p.vec(&x.GroupID) && p.u64(&x.Epoch) && x.Sender.unmarshal(p) &&
		p.vec(&x.AuthenticatedData) && p.contentType(&x.ContentType) &&
		unmarshalContent(p, x.ContentType, &x.ApplicationData, &x.Proposal, &x.Commit)
}

// framedContentToSign (the RFC's FramedContentTBS) is the input to the signature over a FramedContent
// (Section 6.1). Context is encoded only for member and new_member_commit
// senders; a nil Context there encodes as the zero GroupContext. Decoding
// rejects versions other than mls10, the value the RFC fixes.
type framedContentToSign struct {
	Version    ProtocolVersion
	WireFormat WireFormat
	Content    framedContent
	Context    *GroupContext
}

func tbsHasContext(t SenderType) bool {
	return t == SenderTypeMember || t == SenderTypeNewMemberCommit
}

func (x *framedContentToSign) marshal(b *builder) {
	b.u16(uint16(x.Version))
	b.u16(uint16(x.WireFormat))
	x.Content.marshal(b)
	if tbsHasContext(x.Content.Sender.SenderType) {
		orZero(x.Context).marshal(b)
	}
}

func (x *framedContentToSign) unmarshal(p *parser) bool {
	*x = framedContentToSign{}
	var v, wf uint16
	if !p.u16(&v) || !p.u16(&wf) || !x.Content.unmarshal(p) {
		return false
	}
	x.Version, x.WireFormat = ProtocolVersion(v), WireFormat(wf)
	if x.Version != ProtocolVersionMLS10 {
		return false
	}
	if tbsHasContext(x.Content.Sender.SenderType) {
		x.Context = new(GroupContext)
		return x.Context.unmarshal(p)
	}
	return true
}

// framedContentAuthData is the signature over a FramedContent and, for
// commits, the confirmation tag (Section 6.1). Its encoding depends on the
// content type of the enclosing content, so marshal and unmarshal take it.
type framedContentAuthData struct {
	Signature       []byte
	ConfirmationTag []byte // commit only: a MAC, opaque<V>
}

func (x *framedContentAuthData) marshal(b *builder, ct ContentType) {
	b.vec(x.Signature)
	if ct == ContentTypeCommit {
		b.vec(x.ConfirmationTag)
	}
}

func (x *framedContentAuthData) unmarshal(p *parser, ct ContentType) bool {
	*x = framedContentAuthData{}
	if !p.vec(&x.Signature) {
		return false
	}
	if ct == ContentTypeCommit {
		return p.vec(&x.ConfirmationTag)
	}
	return true
}

// authenticatedContent is a FramedContent with its authentication and the
// wire format it is sent in (Section 6).
type authenticatedContent struct {
	WireFormat WireFormat
	Content    framedContent
	Auth       framedContentAuthData
}

func (x *authenticatedContent) marshal(b *builder) {
	b.u16(uint16(x.WireFormat))
	x.Content.marshal(b)
	x.Auth.marshal(b, x.Content.ContentType)
}

func (x *authenticatedContent) unmarshal(p *parser) bool {
	*x = authenticatedContent{}
	var wf uint16
	if !p.u16(&wf) {
		return false
	}
	x.WireFormat = WireFormat(wf)
	return x.Content.unmarshal(p) && x.Auth.unmarshal(p, x.Content.ContentType)
}

// publicMessage is an authenticated, unencrypted message (Section 6.2).
// MembershipTag is present exactly when the sender is a member.
type publicMessage struct {
	Content       framedContent
	Auth          framedContentAuthData
	MembershipTag []byte // member only: a MAC, opaque<V>
}

func (x *publicMessage) marshal(b *builder) {
	x.Content.marshal(b)
	x.Auth.marshal(b, x.Content.ContentType)
	if x.Content.Sender.SenderType == SenderTypeMember {
		b.vec(x.MembershipTag)
	}
}

func (x *publicMessage) unmarshal(p *parser) bool {
	*x = publicMessage{}
	if !x.Content.unmarshal(p) || !x.Auth.unmarshal(p, x.Content.ContentType) {
		return false
	}
	if x.Content.Sender.SenderType == SenderTypeMember {
		return p.vec(&x.MembershipTag)
	}
	return true
}

// privateMessage is an encrypted message (Section 6.3).
type privateMessage struct {
	GroupID             []byte
	Epoch               uint64
	ContentType         ContentType
	AuthenticatedData   []byte
	EncryptedSenderData []byte
	Ciphertext          []byte
}

func (x *privateMessage) marshal(b *builder) {
	b.vec(x.GroupID)
	b.u64(x.Epoch)
	b.u8(uint8(x.ContentType))
	b.vec(x.AuthenticatedData)
	b.vec(x.EncryptedSenderData)
	b.vec(x.Ciphertext)
}

func (x *privateMessage) unmarshal(p *parser) bool {
	*x = privateMessage{}
	return p.vec(&x.GroupID) && p.u64(&x.Epoch) && p.contentType(&x.ContentType) &&
		p.vec(&x.AuthenticatedData) && p.vec(&x.EncryptedSenderData) && p.vec(&x.Ciphertext)
}

// privateMessageContent is the plaintext of PrivateMessage.ciphertext
// (Section 6.3.1). Its encoding depends on PrivateMessage.content_type, so
// marshal and unmarshal take it. Padding is the number of zero bytes that
// follow the auth field; unmarshal takes every remaining byte as padding
// and rejects the content if any of them is not zero.
type privateMessageContent struct {
	ApplicationData []byte         // application
	Proposal        *Proposal      // proposal
	Commit          *commitContent // commit
	Auth            framedContentAuthData
	Padding         int

	body []byte // the content's bytes as decoded: see FramedContent.body
}

func (x *privateMessageContent) marshal(b *builder, ct ContentType) {
	marshalContent(b, ct, x.ApplicationData, x.Proposal, x.Commit)
	x.Auth.marshal(b, ct)
	b.raw(make([]byte, x.Padding))
}

func (x *privateMessageContent) unmarshal(p *parser, ct ContentType) bool {
	*x = privateMessageContent{}
	rest := p.s
	if !unmarshalContent(p, ct, &x.ApplicationData, &x.Proposal, &x.Commit) {
		return false
	}
	x.body = rest[: len(rest)-len(p.s) : len(rest)-len(p.s)]
	if !x.Auth.unmarshal(p, ct) {
		return false
	}
	// Section 6.3.1: the padding must be all zero. Its length is public
	// (it is the plaintext length), so this check need not be constant time
	// with respect to where a non-zero byte is.
	var nonZero byte
	for _, c := range p.s {
		nonZero |= c
	}
	if nonZero != 0 {
		return false
	}
	x.Padding = len(p.s)
	p.s = p.s[len(p.s):]
	return true
}

// senderData identifies the sender and key generation of a PrivateMessage
// (Section 6.3.2).
type senderData struct {
	LeafIndex  uint32
	Generation uint32
	ReuseGuard [4]byte
}

func (x *senderData) marshal(b *builder) {
	b.u32(x.LeafIndex)
	b.u32(x.Generation)
	b.raw(x.ReuseGuard[:])
}

func (x *senderData) unmarshal(p *parser) bool {
	var g []byte
	if !p.u32(&x.LeafIndex) || !p.u32(&x.Generation) || !p.raw(4, &g) {
		return false
	}
	copy(x.ReuseGuard[:], g)
	return true
}

// senderDataAAD is the AAD of the sender data encryption (Section 6.3.2).
type senderDataAAD struct {
	GroupID     []byte
	Epoch       uint64
	ContentType ContentType
}

func (x *senderDataAAD) marshal(b *builder) {
	b.vec(x.GroupID)
	b.u64(x.Epoch)
	b.u8(uint8(x.ContentType))
}

func (x *senderDataAAD) unmarshal(p *parser) bool {
	return p.vec(&x.GroupID) && p.u64(&x.Epoch) && p.contentType(&x.ContentType)
}

// privateContentAAD is the AAD of the content encryption (Section 6.3.1).
type privateContentAAD struct {
	GroupID           []byte
	Epoch             uint64
	ContentType       ContentType
	AuthenticatedData []byte
}

func (x *privateContentAAD) marshal(b *builder) {
	b.vec(x.GroupID)
	b.u64(x.Epoch)
	b.u8(uint8(x.ContentType))
	b.vec(x.AuthenticatedData)
}

func (x *privateContentAAD) unmarshal(p *parser) bool {
	return p.vec(&x.GroupID) && p.u64(&x.Epoch) && p.contentType(&x.ContentType) &&
		p.vec(&x.AuthenticatedData)
}

// mlsMessage is the outer wrapper of every MLS message (Section 6). The
// field named by WireFormat is used; a nil one encodes as its zero value.
// Decoding rejects versions other than mls10 and unknown wire formats.
type mlsMessage struct {
	Version        ProtocolVersion
	WireFormat     WireFormat
	PublicMessage  *publicMessage
	PrivateMessage *privateMessage
	Welcome        *welcomeMessage
	GroupInfo      *GroupInfo
	KeyPackage     *KeyPackage
}

func (x *mlsMessage) marshal(b *builder) {
	b.u16(uint16(x.Version))
	b.u16(uint16(x.WireFormat))
	switch x.WireFormat {
	case WireFormatPublicMessage:
		orZero(x.PublicMessage).marshal(b)
	case WireFormatPrivateMessage:
		orZero(x.PrivateMessage).marshal(b)
	case WireFormatWelcome:
		orZero(x.Welcome).marshal(b)
	case WireFormatGroupInfo:
		orZero(x.GroupInfo).marshal(b)
	case WireFormatKeyPackage:
		orZero(x.KeyPackage).marshal(b)
	}
}

func (x *mlsMessage) unmarshal(p *parser) bool {
	*x = mlsMessage{}
	var v, wf uint16
	if !p.u16(&v) || !p.u16(&wf) {
		return false
	}
	x.Version, x.WireFormat = ProtocolVersion(v), WireFormat(wf)
	if x.Version != ProtocolVersionMLS10 {
		return false
	}
	switch x.WireFormat {
	case WireFormatPublicMessage:
		x.PublicMessage = new(publicMessage)
		return x.PublicMessage.unmarshal(p)
	case WireFormatPrivateMessage:
		x.PrivateMessage = new(privateMessage)
		return x.PrivateMessage.unmarshal(p)
	case WireFormatWelcome:
		x.Welcome = new(welcomeMessage)
		return x.Welcome.unmarshal(p)
	case WireFormatGroupInfo:
		x.GroupInfo = new(GroupInfo)
		return x.GroupInfo.unmarshal(p)
	case WireFormatKeyPackage:
		x.KeyPackage = new(KeyPackage)
		return x.KeyPackage.unmarshal(p)
	}
	return false
}
