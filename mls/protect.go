package mls

import (
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
)

// This file protects and unprotects messages (RFC 9420 §6): signing and
// verifying FramedContent (§6.1), the membership tag of a PublicMessage
// (§6.2), and the encryption of a PrivateMessage's content and sender data
// with keys from the secret tree and the sender_data_secret (§6.3).
//
// The layers are separate, as in the RFC's figure "Relationships among MLS
// Objects": signFramedContent turns a FramedContent into an
// AuthenticatedContent, the caller adds the confirmation tag of a Commit
// (which needs the next epoch's key schedule, see transcript.go), and an
// epochProtection then encodes it as a PublicMessage or PrivateMessage.
// Unprotecting undoes both layers: it checks the membership tag or decrypts,
// and always verifies the signature before returning the content. The
// confirmation tag of a Commit is checked by the caller, against the epoch
// the Commit creates.

var (
	errWrongGroup         = errors.New("mls: message is for another group")
	errWrongEpoch         = errors.New("mls: message is for another epoch")
	errBadSignature       = errors.New("mls: invalid signature on message content")
	errBadMembershipTag   = errors.New("mls: invalid membership tag")
	errDecryptionFailed   = errors.New("mls: message decryption failed")
	errBadSenderData      = errors.New("mls: invalid sender data")
	errMalformedContent   = errors.New("mls: malformed private message content (or non-zero padding)")
	errApplicationInPlain = errors.New("mls: application messages must be sent as PrivateMessage")
)

// framedContentTBS encodes the FramedContentTBS of §6.1: the content and its
// wire format, and, for members and new_member_commit senders, the
// GroupContext of the current epoch, which binds the signature to the group
// and epoch.
func framedContentTBS(wf WireFormat, fc *framedContent, gc *GroupContext) ([]byte, error) {
	tbs := framedContentToSign{Version: ProtocolVersionMLS10, WireFormat: wf, Content: *fc}
	switch fc.Sender.SenderType {
	case SenderTypeMember, SenderTypeNewMemberCommit:
		if gc == nil {
			return nil, errors.New("mls: group context required for this sender")
		}
		tbs.Context = gc
	}
	b := builder{b: make([]byte, 0, fc.encodedLen()+256)}
	tbs.marshal(&b)
	return b.bytes(), nil
}

// signFramedContent signs fc for sending with wire format wf (§6.1):
// signature = SignWithLabel(priv, "FramedContentTBS", FramedContentTBS).
// The confirmation tag of a Commit is left empty for the caller to fill in.
// It parses priv on every call; a sender of many messages should parse its
// key once and use signFramedContentWithKey.
func signFramedContent(s suite, priv []byte, wf WireFormat, fc *framedContent, gc *GroupContext) (*authenticatedContent, error) {
	cs, err := concreteSuite(s)
	if err != nil {
		return nil, err
	}
	sk, err := cs.signKey(priv)
	if err != nil {
		return nil, err
	}
	return signFramedContentWithKey(sk, wf, fc, gc)
}

// signFramedContentWithKey is signFramedContent with an already parsed
// signature key.
func signFramedContentWithKey(sk signingKey, wf WireFormat, fc *framedContent, gc *GroupContext) (*authenticatedContent, error) {
	tbs, err := framedContentTBS(wf, fc, gc)
	if err != nil {
		return nil, err
	}
	// SignWithLabel (§5.1.2) over the parsed key.
	sig, err := sk.sign(signContent("FramedContentTBS", tbs))
	if err != nil {
		return nil, err
	}
	return &authenticatedContent{
		WireFormat: wf,
		Content:    *fc,
		Auth:       framedContentAuthData{Signature: sig},
	}, nil
}

// verifyFramedContent checks the signature of ac with the sender's
// signature public key (§6.1).
func verifyFramedContent(s suite, pub []byte, ac *authenticatedContent, gc *GroupContext) error {
	tbs, err := framedContentTBS(ac.WireFormat, &ac.Content, gc)
	if err != nil {
		return err
	}
	if !verifyWithLabel(s, pub, "FramedContentTBS", tbs, ac.Auth.Signature) {
		return errBadSignature
	}
	return nil
}

// checkSenderContent enforces the pairing of sender type and content type
// of §6.1: external and new_member_proposal senders send proposals,
// new_member_commit senders send commits.
func checkSenderContent(fc *framedContent) error {
	switch fc.ContentType {
	case ContentTypeApplication, ContentTypeProposal, ContentTypeCommit:
	default:
		return errors.New("mls: invalid content type")
	}
	switch fc.Sender.SenderType {
	case SenderTypeMember:
		return nil
	case SenderTypeExternal, SenderTypeNewMemberProposal:
		if fc.ContentType != ContentTypeProposal {
			return errors.New("mls: this sender type may only send proposals")
		}
	case SenderTypeNewMemberCommit:
		if fc.ContentType != ContentTypeCommit {
			return errors.New("mls: new_member_commit sender may only send a commit")
		}
	default:
		return errors.New("mls: invalid sender type")
	}
	return nil
}

// signerKey returns the signature public key of a message's sender (§6.1):
// the leaf's key for a member, the external_senders entry for an external
// sender, the key in the Commit's path or the KeyPackage for a new member.
// It must fail for a blank leaf or an unknown sender, which is how a
// PrivateMessage whose sender data names a blank leaf is rejected (§6.3.2).
type signerKey func(fc *framedContent) ([]byte, error)

// epochProtection holds what one epoch needs to protect and unprotect
// messages: its GroupContext, membership key, sender data secret and secret
// tree. It is not safe for concurrent use: the secret tree is updated by
// every message.
type epochProtection struct {
	s                suite
	gc               *GroupContext
	membershipKey    []byte
	senderDataSecret []byte
	tree             *secretTree

	// paddingSize returns the number of zero bytes to append to the
	// PrivateMessageContent, given the length of its encoding without
	// padding (§6.3.1). Nil means no padding.
	paddingSize func(contentLen int) int
	// rand is the source of reuse guards; nil means crypto/rand.
	rand io.Reader
}

// newEpochProtection sets up message protection for the epoch whose
// GroupContext is gc. It takes the epoch's encryption secret (to start the
// secret tree with nLeaves leaves) from es.
func newEpochProtection(es *epochSecrets, gc *GroupContext, nLeaves uint32, limits secretTreeLimits) (*epochProtection, error) {
	tree, err := es.secretTree(nLeaves, limits)
	if err != nil {
		return nil, err
	}
	return &epochProtection{
		s:                es.s,
		gc:               gc,
		membershipKey:    es.membershipKey,
		senderDataSecret: es.senderDataSecret,
		tree:             tree,
	}, nil
}

func (p *epochProtection) checkGroupEpoch(groupID []byte, epoch uint64) error {
	if !hmac.Equal(groupID, p.gc.GroupID) {
		return errWrongGroup
	}
	if epoch != p.gc.Epoch {
		return errWrongEpoch
	}
	return nil
}

// membershipTag computes MAC(membership_key, AuthenticatedContentTBM)
// (§6.2), where
//
//	struct {
//	  FramedContentTBS content_tbs;
//	  FramedContentAuthData auth;
//	} AuthenticatedContentTBM;
func (p *epochProtection) membershipTag(fc *framedContent, auth *framedContentAuthData) ([]byte, error) {
	tbs, err := framedContentTBS(WireFormatPublicMessage, fc, p.gc)
	if err != nil {
		return nil, err
	}
	b := builder{b: tbs}
	auth.marshal(&b, fc.ContentType)
	return p.s.mac(p.membershipKey, b.bytes()), nil
}

// protectPublic encodes ac as a PublicMessage (§6.2), adding the membership
// tag for member senders. Application data is refused: it must be
// encrypted (§6).
func (p *epochProtection) protectPublic(ac *authenticatedContent) (*publicMessage, error) {
	fc := &ac.Content
	if ac.WireFormat != WireFormatPublicMessage {
		return nil, errors.New("mls: content was signed for another wire format")
	}
	if fc.ContentType == ContentTypeApplication {
		return nil, errApplicationInPlain
	}
	if err := checkSenderContent(fc); err != nil {
		return nil, err
	}
	if err := p.checkGroupEpoch(fc.GroupID, fc.Epoch); err != nil {
		return nil, err
	}
	pm := &publicMessage{Content: *fc, Auth: ac.Auth}
	if fc.Sender.SenderType == SenderTypeMember {
		tag, err := p.membershipTag(fc, &ac.Auth)
		if err != nil {
			return nil, err
		}
		pm.MembershipTag = tag
	}
	return pm, nil
}

// unprotectPublic checks a received PublicMessage (§6.2): group and epoch,
// the membership tag of a member sender (in constant time), and the
// signature with the key that signer returns. Only then is the content
// returned.
func (p *epochProtection) unprotectPublic(pm *publicMessage, signer signerKey) (*authenticatedContent, error) {
	fc := &pm.Content
	if fc.ContentType == ContentTypeApplication {
		return nil, errApplicationInPlain
	}
	if err := checkSenderContent(fc); err != nil {
		return nil, err
	}
	if err := p.checkGroupEpoch(fc.GroupID, fc.Epoch); err != nil {
		return nil, err
	}
	if fc.Sender.SenderType == SenderTypeMember {
		tag, err := p.membershipTag(fc, &pm.Auth)
		if err != nil {
			return nil, err
		}
		if !hmac.Equal(tag, pm.MembershipTag) {
			return nil, errBadMembershipTag
		}
	}
	ac := &authenticatedContent{WireFormat: WireFormatPublicMessage, Content: *fc, Auth: pm.Auth}
	pub, err := signer(fc)
	if err != nil {
		return nil, err
	}
	if err := verifyFramedContent(p.s, pub, ac, p.gc); err != nil {
		return nil, err
	}
	return ac, nil
}

func ratchetFor(ct ContentType) ratchetType {
	if ct == ContentTypeApplication {
		return applicationRatchet
	}
	return handshakeRatchet
}

// applyReuseGuard XORs the reuse guard into the first four bytes of a copy
// of the nonce from the key schedule (§6.3.1).
func applyReuseGuard(nonce []byte, guard [4]byte) []byte {
	n := append([]byte(nil), nonce...)
	for i := range guard {
		n[i] ^= guard[i]
	}
	return n
}

// senderDataKeyNonce derives the key and nonce that protect a
// PrivateMessage's SenderData (§6.3.2) from the epoch's sender_data_secret
// and a sample of the content ciphertext: its first KDF.Nh bytes, or all of
// it when it is shorter.
func senderDataKeyNonce(s suite, senderDataSecret, ciphertext []byte) (key, nonce []byte) {
	sample := ciphertext
	if len(sample) > s.hashLen() {
		sample = sample[:s.hashLen()]
	}
	key = expandWithLabel(s, senderDataSecret, "key", sample, s.aeadKeyLen())
	nonce = expandWithLabel(s, senderDataSecret, "nonce", sample, s.aeadNonceLen())
	return key, nonce
}

// protectPrivate encrypts ac as a PrivateMessage (§6.3). Only members send
// PrivateMessages. The next generation of the sender's handshake or
// application ratchet is consumed, and its key and nonce are wiped once used.
func (p *epochProtection) protectPrivate(ac *authenticatedContent) (*privateMessage, error) {
	fc := &ac.Content
	if ac.WireFormat != WireFormatPrivateMessage {
		return nil, errors.New("mls: content was signed for another wire format")
	}
	if fc.Sender.SenderType != SenderTypeMember {
		return nil, errors.New("mls: only members send private messages")
	}
	if err := checkSenderContent(fc); err != nil {
		return nil, err
	}
	if err := p.checkGroupEpoch(fc.GroupID, fc.Epoch); err != nil {
		return nil, err
	}

	// §6.3.1: PrivateMessageContent with zero padding chosen by the hook.
	pmc := privateMessageContent{
		ApplicationData: fc.ApplicationData,
		Proposal:        fc.Proposal,
		Commit:          fc.Commit,
		Auth:            ac.Auth,
	}
	var b builder
	pmc.marshal(&b, fc.ContentType)
	if p.paddingSize != nil {
		pad := p.paddingSize(len(b.bytes()))
		if pad < 0 || pad > maxVectorLen {
			return nil, fmt.Errorf("mls: invalid padding size %d", pad)
		}
		b.raw(make([]byte, pad))
	}
	plaintext := b.bytes()
	// Receivers cap every vector at maxVectorLen (Section 2.1.2 profile
	// in codec.go); the ciphertext adds the 16-byte AEAD tag.
	if len(plaintext) > maxVectorLen-16 {
		return nil, fmt.Errorf("mls: private message content longer than %d bytes", maxVectorLen-16)
	}

	var guard [4]byte
	r := p.rand
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, guard[:]); err != nil {
		return nil, fmt.Errorf("mls: reading randomness: %w", err)
	}
	k, err := p.tree.nextSendKey(fc.Sender.LeafIndex, ratchetFor(fc.ContentType))
	if err != nil {
		return nil, err
	}
	nonce := applyReuseGuard(k.nonce, guard)
	aad := marshal(&privateContentAAD{
		GroupID:           fc.GroupID,
		Epoch:             fc.Epoch,
		ContentType:       fc.ContentType,
		AuthenticatedData: fc.AuthenticatedData,
	})
	ciphertext, err := p.s.aeadSeal(k.key, nonce, aad, plaintext)
	clear(k.key)
	clear(k.nonce)
	clear(nonce)
	clear(plaintext)
	if err != nil {
		return nil, err
	}

	// §6.3.2: SenderData under a key and nonce from the ciphertext sample.
	sd := marshal(&senderData{LeafIndex: fc.Sender.LeafIndex, Generation: k.generation, ReuseGuard: guard})
	sdKey, sdNonce := senderDataKeyNonce(p.s, p.senderDataSecret, ciphertext)
	sdAAD := marshal(&senderDataAAD{GroupID: fc.GroupID, Epoch: fc.Epoch, ContentType: fc.ContentType})
	encSD, err := p.s.aeadSeal(sdKey, sdNonce, sdAAD, sd)
	if err != nil {
		return nil, err
	}
	return &privateMessage{
		GroupID:             fc.GroupID,
		Epoch:               fc.Epoch,
		ContentType:         fc.ContentType,
		AuthenticatedData:   fc.AuthenticatedData,
		EncryptedSenderData: encSD,
		Ciphertext:          ciphertext,
	}, nil
}

// unprotectPrivate decrypts a received PrivateMessage (§6.3): the sender
// data first, then the content with the key of the sender's ratchet at the
// generation it names, and finally it verifies the signature with the key
// signer returns for the sender. The ratchet key is consumed (deleted, and
// the ratchet moved past it) only once the content decrypts and its
// signature verifies (§9.2), so a forged message cannot burn keys.
func (p *epochProtection) unprotectPrivate(pm *privateMessage, signer signerKey) (*authenticatedContent, error) {
	if err := p.checkGroupEpoch(pm.GroupID, pm.Epoch); err != nil {
		return nil, err
	}
	switch pm.ContentType {
	case ContentTypeApplication, ContentTypeProposal, ContentTypeCommit:
	default:
		return nil, errors.New("mls: invalid content type")
	}

	sdKey, sdNonce := senderDataKeyNonce(p.s, p.senderDataSecret, pm.Ciphertext)
	sdAAD := marshal(&senderDataAAD{GroupID: pm.GroupID, Epoch: pm.Epoch, ContentType: pm.ContentType})
	sdBytes, err := p.s.aeadOpen(sdKey, sdNonce, sdAAD, pm.EncryptedSenderData)
	if err != nil {
		return nil, errBadSenderData
	}
	var sd senderData
	if err := unmarshal(sdBytes, &sd); err != nil {
		return nil, errBadSenderData
	}
	if sd.LeafIndex >= p.tree.nLeaves {
		return nil, errBadSenderData
	}

	k, pending, err := p.tree.receiveKey(sd.LeafIndex, ratchetFor(pm.ContentType), sd.Generation)
	if err != nil {
		return nil, err
	}
	ac, err := p.openContent(pm, &sd, k, signer)
	if err != nil {
		// §9.2: nothing is consumed, and what the lookup derived is wiped.
		pending.discard()
		return nil, err
	}
	// §9.2: the key and nonce are consumed now that the message has been
	// authenticated. Consuming them only after the signature check keeps
	// a member, who can derive every sender's keys, from burning another
	// sender's generations with forged messages. commit deletes a stored
	// (skipped) key; a freshly derived one is wiped here.
	pending.commit()
	clear(k.key)
	clear(k.nonce)
	return ac, nil
}

// openContent decrypts the content of pm with the key k of its sender's
// ratchet and verifies its signature (§6.3.1, §6.1). It changes nothing.
func (p *epochProtection) openContent(pm *privateMessage, sd *senderData, k ratchetKey, signer signerKey) (*authenticatedContent, error) {
	nonce := applyReuseGuard(k.nonce, sd.ReuseGuard)
	aad := marshal(&privateContentAAD{
		GroupID:           pm.GroupID,
		Epoch:             pm.Epoch,
		ContentType:       pm.ContentType,
		AuthenticatedData: pm.AuthenticatedData,
	})
	plaintext, err := p.s.aeadOpen(k.key, nonce, aad, pm.Ciphertext)
	clear(nonce)
	if err != nil {
		return nil, errDecryptionFailed
	}

	// §6.3.1: the content, then auth, then padding that must be all zero;
	// the decoder rejects the content otherwise.
	var pmc privateMessageContent
	pp := newParser(plaintext)
	if !pmc.unmarshal(pp, pm.ContentType) || !pp.empty() {
		return nil, errMalformedContent
	}
	ac := &authenticatedContent{
		WireFormat: WireFormatPrivateMessage,
		Content: framedContent{
			GroupID:           pm.GroupID,
			Epoch:             pm.Epoch,
			Sender:            Sender{SenderType: SenderTypeMember, LeafIndex: sd.LeafIndex},
			AuthenticatedData: pm.AuthenticatedData,
			ContentType:       pm.ContentType,
			ApplicationData:   pmc.ApplicationData,
			Proposal:          pmc.Proposal,
			Commit:            pmc.Commit,
			body:              pmc.body,
		},
		Auth: pmc.Auth,
	}
	pub, err := signer(&ac.Content)
	if err != nil {
		return nil, err
	}
	if err := verifyFramedContent(p.s, pub, ac, p.gc); err != nil {
		return nil, err
	}
	return ac, nil
}
