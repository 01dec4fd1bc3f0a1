package mls

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
)

// This file holds the Group type: the state of one member in one group
// (RFC 9420, Sections 8, 11 and 12) and its small public API. Commits are
// created in commit_create.go and processed in commit_process.go, joins are
// in join.go, application messages in appmsg.go and persistence in state.go.

// Errors returned by group operations. They are wrapped with details;
// test for them with [errors.Is]. A failing operation never changes the
// group state.
var (
	// ErrWrongEpoch means a message belongs to an epoch this member does not
	// hold keys for: a future epoch, or a past one outside the window of
	// [Config.MaxPastEpochs].
	ErrWrongEpoch = errors.New("mls: message epoch not available")
	// ErrWrongGroup means a message is for another group.
	ErrWrongGroup = errors.New("mls: message for another group")
	// ErrUnknownSender means the sender of a message is not a member.
	ErrUnknownSender = errors.New("mls: sender is not a member")
	// ErrInvalidSignature means a signature did not verify.
	ErrInvalidSignature = errors.New("mls: invalid signature")
	// ErrInvalidMembershipTag means a PublicMessage's membership tag did not
	// verify (Section 6.2).
	ErrInvalidMembershipTag = errors.New("mls: invalid membership tag")
	// ErrInvalidConfirmationTag means a Commit's or GroupInfo's
	// confirmation tag did not verify (Section 6.1).
	ErrInvalidConfirmationTag = errors.New("mls: invalid confirmation tag")
	// ErrInvalidProposal means a proposal or a proposal list breaks the
	// rules of Sections 12.1 and 12.2.
	ErrInvalidProposal = errors.New("mls: invalid proposal")
	// ErrInvalidCommit means a Commit breaks the rules of Section 12.4.2.
	ErrInvalidCommit = errors.New("mls: invalid commit")
	// ErrInvalidLeafNode means a LeafNode or KeyPackage failed validation
	// (Sections 7.3 and 10.1).
	ErrInvalidLeafNode = errors.New("mls: invalid leaf node")
	// ErrDecrypt means a message could not be decrypted: it was forged,
	// corrupted, or its key was already consumed (a replay).
	ErrDecrypt = errors.New("mls: cannot decrypt message")
	// ErrReplay means the key of a PrivateMessage was already consumed or
	// dropped: a replayed or too old message (Section 9.2).
	ErrReplay = errors.New("mls: message key already used or deleted")
	// ErrNotForUs means a Welcome holds no secrets for this KeyPackage.
	ErrNotForUs = errors.New("mls: welcome is not for this key package")
	// ErrInvalidWelcome means a Welcome or GroupInfo failed validation
	// (Section 12.4.3).
	ErrInvalidWelcome = errors.New("mls: invalid welcome")
	// ErrPendingCommit means an own Commit is waiting for
	// [Group.ConfirmCommit] or [Group.DiscardCommit].
	ErrPendingCommit = errors.New("mls: a commit is pending")
	// ErrNoPendingCommit means there is no own Commit to confirm.
	ErrNoPendingCommit = errors.New("mls: no pending commit")
	// ErrRemoved means this member was removed from the group and can no
	// longer send.
	ErrRemoved = errors.New("mls: member was removed from the group")
	// ErrMissingPSK means a pre-shared key named by a message is unknown.
	ErrMissingPSK = errors.New("mls: pre-shared key not available")
)

// Defaults for [Config].
const (
	defaultMaxPastEpochs   = 3
	defaultMaxLeafLifetime = 365 * 24 * time.Hour
)

// NoMaxLeafLifetime, as [Config.MaxLeafLifetime], accepts KeyPackage
// leaves of any total lifetime (Section 7.3).
const NoMaxLeafLifetime time.Duration = -1

// Config tunes a Group. A nil *Config or a zero field means the default.
// A Config must not be modified after it has been passed to this package.
type Config struct {
	// Time returns the current time, for lifetime checks (Section 7.3).
	// The default is time.Now.
	Time func() time.Time

	// KeyPackageLifetime is the validity of generated KeyPackages; the
	// default is 90 days.
	KeyPackageLifetime time.Duration

	// MaxLeafLifetime is the longest total lifetime (not_after minus
	// not_before) accepted on the leaf of a KeyPackage (Section 7.3
	// requires applications to set one). The default is 365 days, or
	// KeyPackageLifetime plus the clock skew allowance if that is longer.
	// [NoMaxLeafLifetime] (or any negative value) sets no maximum, for
	// peers whose KeyPackages carry the lifetime 0..2^63-1 that several
	// implementations use by default; the lifetime must still cover the
	// current time.
	MaxLeafLifetime time.Duration

	// MaxPastEpochs is how many past epochs keep their application keys
	// for late messages (Sections 15.3 and 9.2). The default is 3; a
	// negative value keeps none.
	MaxPastEpochs int

	// MaxForwardSkip is how many generations a received message may skip
	// ahead in its sender's ratchet; the default is 1,000.
	MaxForwardSkip uint32

	// MaxRetainedKeys is how many keys of skipped generations one ratchet
	// keeps for out-of-order messages; the default is 1,000.
	MaxRetainedKeys int

	// Padding returns the number of zero bytes to append to a
	// PrivateMessage whose content (with its authentication data) is n
	// bytes long (Section 6.3.1). The default adds none. Padding is
	// visible only as the ciphertext length.
	Padding func(n int) int

	// PublicHandshake sends proposals and commits as PublicMessage rather
	// than PrivateMessage. External commits are always public.
	PublicHandshake bool

	// OutOfBandTree leaves the ratchet_tree extension out of Welcome
	// messages and GroupInfos; joiners then need the tree from
	// [Group.RatchetTree].
	OutOfBandTree bool

	// ExternalPSKs maps a PSK id (as a string of its bytes) to its value,
	// for PreSharedKey proposals of type external (Section 8.4).
	ExternalPSKs map[string][]byte

	// SkipLifetimeCheck disables the lifetime check on received leaf nodes.
	// Lifetimes of KeyPackages this member adds are always checked.
	SkipLifetimeCheck bool

	// ExternalPolicy decides on everything that comes from outside the
	// group: proposals from new_member_proposal and external senders
	// (Section 12.1.8) and external Commits (Section 12.4.3.2). It is
	// called once the message has passed every check of the RFC, and
	// returns nil to admit it; a refused message fails with
	// [ErrRefusedByPolicy] (wrapping the returned error) and changes
	// nothing. A proposal is decided on when it is received: only admitted
	// ones are cached, so only they can be committed. When nil, nothing
	// from outside the group is admitted.
	ExternalPolicy func(ExternalRequest) error

	// ValidateCredential is the application's Authentication Service
	// (Section 5.3.1): it reports whether cred legitimately belongs to the
	// holder of signatureKey. It is called for every leaf that enters the
	// group or changes: the KeyPackage of an Add, the leaf of an Update,
	// the leaf of a Commit's UpdatePath (external Commits included), and
	// every leaf of the tree a member joins with, and for every entry of an
	// external_senders extension that a GroupContextExtensions proposal
	// sets. An error refuses the leaf, with [ErrInvalidCredential]. When
	// nil, every credential is accepted: the application must then
	// authenticate members some other way.
	ValidateCredential func(cred Credential, signatureKey []byte) error

	// ValidateSuccessor decides whether a member may replace its leaf's
	// credential old with next, in an Update, in its Commit's UpdatePath,
	// or in an external Commit that replaces its leaf (Section 5.3.1: the
	// new credential must be "valid as a successor"). It is called only
	// when the two differ, after ValidateCredential has accepted next.
	// When nil, a leaf keeps its credential for life.
	ValidateSuccessor func(old, next Credential) error

	// CommitPolicy decides on the Commits of members: the application's
	// rules of who may change what (RFC 9420, Sections 12.1.7, 12.2 and
	// 12.4.2 leave authorization to the application). It is called with
	// the Commit's proposals once they have passed every check of the RFC:
	//
	//   - when this member creates a Commit ([Group.Commit],
	//     [Group.AddMembers], [Group.RemoveMembers], [Group.SelfUpdate]),
	//     first with the proposals the caller asks for, then once per
	//     pending proposal offered on top of them. A refusal of the
	//     caller's proposals fails the call, with [ErrRefusedByPolicy] and
	//     nothing changed; a pending proposal whose addition is refused is
	//     left out and listed in [CommitResult.Dropped], so no proposal a
	//     peer sends can stop this member from committing;
	//   - when this member processes a Commit from another member, before
	//     it is applied: a refusal refuses the Commit, with
	//     [ErrRefusedByPolicy] (wrapping the returned error), and changes
	//     nothing (but the ratchet key of a PrivateMessage, Section 9.2).
	//
	//   - when a member sends a proposal, or this member receives one,
	//     before it is cached ([CommitCheck.ProposalOnly] is set and the
	//     sender stands as committer): a refusal fails the call, or
	//     refuses the message, so the proposal never waits in the cache.
	//
	// Since it may be called with part of a Commit's list, a policy
	// should judge each proposal with the committer and the current
	// extensions, not the list as a whole. External Commits go to
	// [Config.ExternalPolicy] instead. When nil, every Commit that passes
	// the checks of the RFC is allowed.
	CommitPolicy func(CommitCheck) error

	// ExternalCommitExtensions lets an external Commit carry one
	// GroupContextExtensions proposal by value (Section 12.1.7) besides its
	// ExternalInit, so that a join can change the group's state in the
	// same Commit (an application records there that an invite was used).
	// Section 12.4.3.2 does not list that proposal for external Commits:
	// groups that set this depart from the RFC, and every member of such a
	// group must set it alike. [Config.ExternalPolicy] sees the extensions
	// the Commit leaves in effect ([ExternalRequest].Extensions) and
	// decides. When false, an external Commit with any other proposal than
	// the RFC lists is invalid.
	ExternalCommitExtensions bool

	// ExtensionTypes lists the application's own extension types that
	// this client supports. They go into the capabilities of the
	// KeyPackages it generates (Section 7.2), as every member must list a
	// GroupContext extension that is not a default one before a group can
	// carry it (Sections 12.1.7 and 13.4).
	ExtensionTypes []ExtensionType
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Time == nil {
		out.Time = time.Now
	}
	if out.KeyPackageLifetime <= 0 {
		out.KeyPackageLifetime = defaultKeyPackageLifetime
	}
	if out.MaxLeafLifetime == 0 {
		out.MaxLeafLifetime = max(defaultMaxLeafLifetime, out.KeyPackageLifetime+lifetimeSkew)
	} else if out.MaxLeafLifetime < 0 {
		out.MaxLeafLifetime = NoMaxLeafLifetime
	}
	if out.MaxPastEpochs == 0 {
		out.MaxPastEpochs = defaultMaxPastEpochs
	} else if out.MaxPastEpochs < 0 {
		out.MaxPastEpochs = 0
	}
	return out
}

func (c *Config) now() time.Time { return c.Time() }

func (c *Config) limits() secretTreeLimits {
	return secretTreeLimits{MaxForwardSkip: c.MaxForwardSkip, MaxRetainedKeys: c.MaxRetainedKeys}
}

// epochKeys is what a member needs to read the messages of one epoch: the
// GroupContext (signatures of members cover it, Section 6.1), the tree
// (for the senders' signature keys), and the message protection keys of
// Sections 6 and 9.
type epochKeys struct {
	ctx  *GroupContext
	tree *ratchetTree
	prot *epochProtection
	// treeEnc is tree in the encoding of the ratchet_tree extension, made
	// on first use (see encodedTree); nil until then. An epoch's tree
	// never changes (commits work on a clone), so neither does this.
	treeEnc []byte
}

// encodedTree returns the epoch's tree encoded (Section 12.4.3.3),
// encoding it once per epoch: a large room's committer needs it for the
// size check, the Commit's out-of-band tree and the GroupInfo, and for a
// 10,000-member post-quantum tree each encoding is 26 MB. Callers must not
// modify the result.
func (e *epochKeys) encodedTree() []byte {
	if e.treeEnc == nil {
		e.treeEnc = e.tree.encode()
	}
	return e.treeEnc
}

// Group is one member's state in one group. Its methods are not safe for
// concurrent use.
type Group struct {
	cfg Config
	s   suite

	// The current epoch.
	cur     *epochKeys
	keys    *epochSecrets // exporter, confirmation, init, ... of cur
	priv    *privateTree  // own HPKE private keys in cur.tree
	own     leafIndex
	sigPriv []byte
	interim []byte // interim_transcript_hash of the epoch (Section 8.2)
	confTag []byte // confirmation tag of the Commit that created the epoch

	// proposals received (or sent) in the current epoch, for commits by
	// reference (Section 12.4).
	proposals []cachedProposal

	// past holds the application keys of recent epochs, oldest first.
	past []*epochKeys

	// resumption holds the resumption PSKs of recent epochs (Section 8.6),
	// oldest first.
	resumption []resumptionPSK

	pending *pendingCommit
	removed bool

	// signer is sigPriv parsed, made on first use.
	signer signingKey

	// index caches the member index of indexTree (proposallist.go).
	index     *memberIndex
	indexTree *ratchetTree
}

type resumptionPSK struct {
	epoch uint64
	psk   []byte
}

// maxResumptionPSKs bounds how many past epochs keep their resumption PSK.
const maxResumptionPSKs = 8

// NewGroup creates a group with this member alone in epoch 0 (Section 11).
// groupID is the application's group id (for rooms, the SHA-256 of the
// channel name). The member's leaf comes from bundle, which is consumed.
func NewGroup(groupID []byte, bundle *KeyPackageBundle, cfg *Config) (*Group, error) {
	return NewGroupWithExtensions(groupID, bundle, nil, cfg)
}

// NewGroupWithExtensions is [NewGroup] with the GroupContext extensions
// exts in epoch 0 (Section 11: the creator chooses the group's initial
// extensions). The creator's leaf must support them (Section 11.1): list
// the application's types in [Config.ExtensionTypes] before generating
// bundle.
func NewGroupWithExtensions(groupID []byte, bundle *KeyPackageBundle, exts []Extension, cfg *Config) (*Group, error) {
	c := cfg.withDefaults()
	if len(groupID) == 0 {
		return nil, errors.New("mls: empty group id")
	}
	s := bundle.s
	leaf := bundle.kp.LeafNode
	if hasDuplicateExtensions(exts) {
		return nil, errors.New("mls: group context extensions with duplicates")
	}
	if err := checkLeafSupports(&leaf, exts); err != nil {
		return nil, fmt.Errorf("mls: the creator's leaf: %w", err)
	}
	for _, e := range exts {
		if e.ExtensionType == ExtensionTypeRatchetTree || e.ExtensionType == ExtensionTypeExternalPub {
			return nil, fmt.Errorf("mls: extension %d does not belong in a GroupContext", e.ExtensionType)
		}
	}
	tree := newRatchetTree(s, &leaf)
	ctx := GroupContext{
		Version:     ProtocolVersionMLS10,
		CipherSuite: s.id(),
		GroupID:     bytes.Clone(groupID),
		Epoch:       0,
		TreeHash:    bytes.Clone(tree.treeHash()),
		Extensions:  cloneExtensions(exts),
	}
	// Section 11: a fresh init secret, an all-zero commit secret, and
	// empty transcript hashes; the confirmation tag is computed over the
	// empty confirmed transcript hash.
	init, err := newRandomInitSecret(s, rand.Reader)
	if err != nil {
		return nil, err
	}
	keys, err := deriveEpoch(s, init, nil, nil, &ctx)
	if err != nil {
		return nil, err
	}
	g := &Group{
		cfg:     c,
		s:       s,
		priv:    newPrivateTree(0, bundle.encPriv, leaf.EncryptionKey),
		own:     0,
		sigPriv: bytes.Clone(bundle.sigPriv),
	}
	confTag := keys.confirmationTag(ctx.ConfirmedTranscriptHash)
	if err := g.installEpoch(ctx, tree, keys, confTag); err != nil {
		return nil, err
	}
	return g, nil
}

// deriveEpoch runs the key schedule of Section 8 from an init secret (which
// is consumed), a commit secret and a psk_secret (nil for zero).
func deriveEpoch(s suite, init *initSecret, commitSecret, pskSecret []byte, ctx *GroupContext) (*epochSecrets, error) {
	js, err := init.joiner(commitSecret, ctx)
	if err != nil {
		return nil, err
	}
	ms, err := js.withPSK(pskSecret)
	if err != nil {
		return nil, err
	}
	return ms.epoch(ctx)
}

// installEpoch makes (ctx, tree, keys) the current epoch, moving the old
// one to the window of past epochs.
func (g *Group) installEpoch(ctx GroupContext, tree *ratchetTree, keys *epochSecrets, confTag []byte) error {
	c := ctx
	prot, err := newEpochProtection(keys, &c, tree.size(), g.cfg.limits())
	if err != nil {
		return err
	}
	prot.paddingSize = g.cfg.Padding
	if g.cur != nil {
		if g.cfg.MaxPastEpochs > 0 {
			// Past epochs only read application messages, which are never
			// PublicMessages: their membership key and handshake ratchets
			// are not needed, and are deleted (Sections 9.2 and 15.3).
			clear(g.cur.prot.membershipKey)
			g.cur.prot.membershipKey = nil
			g.cur.prot.tree.keepApplicationOnly()
			g.cur.treeEnc = nil // past epochs read messages, never trees
			g.past = append(g.past, g.cur)
			if len(g.past) > g.cfg.MaxPastEpochs {
				g.past[0].wipe()
				g.past = g.past[1:]
			}
		} else {
			g.cur.wipe()
		}
	}
	if g.keys != nil {
		g.resumption = append(g.resumption, resumptionPSK{epoch: g.cur.ctx.Epoch, psk: bytes.Clone(g.keys.resumptionPSK)})
		if len(g.resumption) > maxResumptionPSKs {
			clear(g.resumption[0].psk)
			g.resumption = g.resumption[1:]
		}
		g.keys.wipe()
	}
	g.cur = &epochKeys{ctx: &c, tree: tree, prot: prot}
	g.keys = keys
	g.confTag = confTag
	g.interim = interimTranscriptHash(g.s, c.ConfirmedTranscriptHash, confTag)
	g.proposals = nil
	return nil
}

// wipe clears the secrets of an epoch that is no longer needed.
func (e *epochKeys) wipe() {
	if e.prot == nil {
		return
	}
	clear(e.prot.senderDataSecret)
	clear(e.prot.membershipKey)
	e.prot.tree.wipe()
	e.prot = nil
}

// wipe clears the secrets of an epoch, except those its epochProtection
// owns (sender data secret, membership key).
func (e *epochSecrets) wipe() {
	for _, b := range [][]byte{e.exporterSecret, e.externalSecret, e.confirmationKey, e.epochAuthenticator, e.initSecret, e.resumptionPSK} {
		clear(b)
	}
}

// GroupID returns the group id.
func (g *Group) GroupID() []byte { return bytes.Clone(g.cur.ctx.GroupID) }

// Epoch returns the current epoch number.
func (g *Group) Epoch() uint64 { return g.cur.ctx.Epoch }

// Extensions returns a copy of the current GroupContext extensions
// (Section 8.1).
func (g *Group) Extensions() []Extension { return cloneExtensions(g.cur.ctx.Extensions) }

// CipherSuite returns the group's cipher suite.
func (g *Group) CipherSuite() CipherSuite { return g.s.id() }

// LeafIndex returns this member's leaf index.
func (g *Group) LeafIndex() uint32 { return uint32(g.own) }

// EpochAuthenticator returns the epoch_authenticator of the current epoch
// (Section 8.7). Members that agree on it agree on the group state.
func (g *Group) EpochAuthenticator() []byte { return bytes.Clone(g.keys.epochAuthenticator) }

// Export returns an MLS-Exporter value of the current epoch (Section 8.5).
func (g *Group) Export(label string, context []byte, length int) ([]byte, error) {
	return g.keys.export(label, context, length)
}

// Active reports whether this member is still in the group. It turns false
// once a Commit removing the member has been processed.
func (g *Group) Active() bool { return !g.removed }

// Member is one entry of the roster.
type Member struct {
	LeafIndex  uint32
	Identity   string // the did: string of a BasicCredential
	Credential Credential
	// SignatureKey is the member's signature public key.
	SignatureKey []byte
}

// Members returns the roster: every non-blank leaf, in leaf order.
func (g *Group) Members() []Member {
	t := g.cur.tree
	var out []Member
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		ln := t.leafNode(l)
		if ln == nil {
			continue
		}
		out = append(out, memberOf(l, ln))
	}
	return out
}

func memberOf(l leafIndex, ln *LeafNode) Member {
	m := Member{
		LeafIndex:    uint32(l),
		Credential:   ln.Credential,
		SignatureKey: bytes.Clone(ln.SignatureKey),
	}
	if ln.Credential.CredentialType == CredentialTypeBasic {
		m.Identity = string(ln.Credential.Identity)
	}
	return m
}

// MemberByIdentity returns the member whose BasicCredential identity is did.
func (g *Group) MemberByIdentity(did string) (Member, bool) {
	for _, m := range g.Members() {
		if m.Identity == did {
			return m, true
		}
	}
	return Member{}, false
}

// RatchetTree returns the current ratchet tree in the encoding of the
// ratchet_tree extension (Section 12.4.3.3), for joiners that receive the
// tree out of band. The tree is encoded once per epoch; each call returns
// a copy.
func (g *Group) RatchetTree() []byte { return bytes.Clone(g.cur.encodedTree()) }

// RatchetTreeSize returns len(g.RatchetTree()) without the copy.
func (g *Group) RatchetTreeSize() int { return len(g.cur.encodedTree()) }

// TreeHash returns the tree_hash of the current epoch's GroupContext: the
// hash of the root of the ratchet tree (Section 7.8). A joiner checks an
// out-of-band tree against it, and is handed it by
// [JoinOptions.FetchTree], so it names the tree of an epoch.
func (g *Group) TreeHash() []byte { return bytes.Clone(g.cur.ctx.TreeHash) }

// checkCanSend reports why this member cannot send right now.
func (g *Group) checkCanSend() error {
	if g.removed {
		return ErrRemoved
	}
	if g.pending != nil {
		return ErrPendingCommit
	}
	return nil
}

// epochFor returns the keys of the given epoch: the current one or one in
// the window of past epochs.
func (g *Group) epochFor(epoch uint64) (*epochKeys, error) {
	if epoch == g.cur.ctx.Epoch {
		return g.cur, nil
	}
	for _, e := range g.past {
		if e.ctx.Epoch == epoch && e.prot != nil {
			return e, nil
		}
	}
	return nil, fmt.Errorf("%w: epoch %d (current %d)", ErrWrongEpoch, epoch, g.cur.ctx.Epoch)
}

// signContent signs fc as this member (Section 6.1), with the signature key
// parsed once per Group.
func (g *Group) signContent(wf WireFormat, fc *framedContent, gc *GroupContext) (*authenticatedContent, error) {
	if g.signer == nil {
		sk, err := g.s.signKey(g.sigPriv)
		if err != nil {
			return nil, err
		}
		g.signer = sk
	}
	return signFramedContentWithKey(g.signer, wf, fc, gc)
}
