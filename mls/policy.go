package mls

import (
	"bytes"
	"errors"
	"fmt"
)

// This file holds the application's say over a group: what may come from
// outside it ([Config.ExternalPolicy], RFC 9420, Sections 12.1.8 and
// 12.4.3.2) and which credentials its leaves may carry
// ([Config.ValidateCredential] and [Config.ValidateSuccessor], Section
// 5.3.1). The engine applies the rules of the RFC itself; these hooks add
// the rules that the RFC leaves to the application.

var (
	// ErrRefusedByPolicy means the application's policy refused a message
	// from outside the group: a proposal from a new_member_proposal or
	// external sender, or an external Commit (see [Config.ExternalPolicy]);
	// or a member's Commit (see [Config.CommitPolicy]).
	ErrRefusedByPolicy = errors.New("mls: refused by the application's policy")
	// ErrInvalidCredential means a leaf's credential was refused: by
	// [Config.ValidateCredential], because another leaf holds it, or
	// because a member tried to replace its own without
	// [Config.ValidateSuccessor] allowing it. It comes together with
	// [ErrInvalidLeafNode] or [ErrInvalidProposal].
	ErrInvalidCredential = errors.New("mls: credential refused")
	// ErrPendingProposals means proposals of the current epoch must be
	// committed before this member sends application data (Section 12.4).
	// A member can always commit them: [Group.SelfUpdate] includes those
	// that are valid and drops the rest. [Group.DiscardProposals] drops
	// them without a Commit.
	ErrPendingProposals = errors.New("mls: proposals are pending; commit them first")
)

// ExternalRequest is a message from outside the group, on which
// [Config.ExternalPolicy] decides. It holds copies: the policy may keep
// or change them.
type ExternalRequest struct {
	// GroupID and Epoch name the group and the epoch the message is for.
	GroupID []byte
	Epoch   uint64

	// Sender is who sent the message: SenderTypeNewMemberProposal or
	// SenderTypeExternal for a proposal, SenderTypeNewMemberCommit for an
	// external Commit.
	Sender Sender

	// ExternalSender is the entry of the group's external_senders
	// extension that signed a proposal of a SenderTypeExternal sender
	// (Section 12.1.8.1); nil for other senders.
	ExternalSender *ExternalSender

	// Proposal is the proposal, for proposals; nil for an external Commit.
	Proposal *Proposal

	// Joiner is who would join the group: the member of an external Commit
	// (LeafIndex is its leaf in the new epoch), or of an Add proposal
	// (LeafIndex is 0: the leaf is known only once a Commit includes it).
	// Nil for proposals other than Add.
	Joiner *Member

	// Replaces is the member an external Commit removes: an earlier
	// appearance of the joiner (a "resync", Section 12.4.3.2). Nil when it
	// removes nobody.
	Replaces *Member

	// AuthenticatedData is the message's authenticated_data (Section
	// 6.1), which the sender signed: where an application carries what
	// authorizes the request (see [ExternalJoinOptions]).
	AuthenticatedData []byte

	// Extensions are, for an external Commit, the GroupContext extensions
	// in effect once it is applied: those of the group unless the Commit
	// carries a GroupContextExtensions proposal (see
	// [Config.ExternalCommitExtensions]). Nil for proposals.
	Extensions []Extension
}

// checkExternalProposal asks the application's policy about a proposal
// received from outside the group (Section 12.1.8: "External proposals
// that are not authorized are considered invalid").
func (g *Group) checkExternalProposal(p *Proposal, sender Sender, ad []byte) error {
	// The policy gets copies: nothing it does can change the group.
	var cp Proposal
	if err := unmarshal(marshal(p), &cp); err != nil {
		return invalidProposal("proposal does not re-encode")
	}
	req := ExternalRequest{
		GroupID:           bytes.Clone(g.cur.ctx.GroupID),
		Epoch:             g.cur.ctx.Epoch,
		Sender:            sender,
		Proposal:          &cp,
		AuthenticatedData: bytes.Clone(ad),
	}
	if sender.SenderType == SenderTypeExternal {
		es, err := g.externalSender(sender.SenderIndex)
		if err != nil {
			return err
		}
		req.ExternalSender = es
	}
	if cp.ProposalType == ProposalTypeAdd && cp.Add != nil {
		m := memberOf(0, &cp.Add.KeyPackage.LeafNode)
		req.Joiner = &m
	}
	return g.askExternalPolicy(&req)
}

// checkExternalCommit asks the application's policy about an external
// Commit (Section 12.4.3.2) whose joiner takes leaf joiner of tree, the
// new epoch's tree, which leaves exts in effect, and which removes the
// member at replaced (when resync is set).
func (g *Group) checkExternalCommit(tree *ratchetTree, exts []Extension, joiner leafIndex, replaced leafIndex, resync bool, ad []byte) error {
	m := memberOf(joiner, tree.leafNode(joiner))
	m.Credential = cloneCredential(&m.Credential)
	req := ExternalRequest{
		GroupID:           bytes.Clone(g.cur.ctx.GroupID),
		Epoch:             g.cur.ctx.Epoch,
		Sender:            Sender{SenderType: SenderTypeNewMemberCommit},
		Joiner:            &m,
		AuthenticatedData: bytes.Clone(ad),
		Extensions:        cloneExtensions(exts),
	}
	if resync {
		if ln := g.cur.tree.leafNode(replaced); ln != nil {
			r := memberOf(replaced, ln)
			r.Credential = cloneCredential(&r.Credential)
			req.Replaces = &r
		}
	}
	return g.askExternalPolicy(&req)
}

func (g *Group) askExternalPolicy(req *ExternalRequest) error {
	if g.cfg.ExternalPolicy == nil {
		return fmt.Errorf("%w: no policy admits messages from outside the group", ErrRefusedByPolicy)
	}
	if err := g.cfg.ExternalPolicy(*req); err != nil {
		return fmt.Errorf("%w: %w", ErrRefusedByPolicy, err)
	}
	return nil
}

// externalSender returns the entry i of the group's external_senders
// extension.
func (g *Group) externalSender(i uint32) (*ExternalSender, error) {
	data, ok := findExtension(g.cur.ctx.Extensions, ExtensionTypeExternalSenders)
	if !ok {
		return nil, fmt.Errorf("%w: no external senders", ErrUnknownSender)
	}
	var es externalSenders
	if err := unmarshal(data, &es); err != nil || int(i) >= len(es.Senders) {
		return nil, fmt.Errorf("%w: external sender %d", ErrUnknownSender, i)
	}
	return &es.Senders[i], nil
}

// Credentials (Section 5.3.1).

// validateCredential has the application's Authentication Service check
// that cred belongs to the holder of signatureKey (Section 5.3.1). It is
// the first step of leaf node validation (Section 7.3).
func (c *Config) validateCredential(cred *Credential, signatureKey []byte) error {
	if c.ValidateCredential == nil {
		return nil
	}
	if err := c.ValidateCredential(cloneCredential(cred), bytes.Clone(signatureKey)); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrInvalidLeafNode, ErrInvalidCredential, err)
	}
	return nil
}

// checkSuccessor checks that a member whose leaf held old may now present
// next (Section 5.3.1: "the AS MUST also verify that the set of presented
// identifiers in the new credential is valid as a successor"). Without
// [Config.ValidateSuccessor] a leaf keeps its credential for life.
func (c *Config) checkSuccessor(old, next *Credential) error {
	if sameCredential(old, next) {
		return nil
	}
	if c.ValidateSuccessor == nil {
		return fmt.Errorf("%w: %w: a member may not change its credential", ErrInvalidLeafNode, ErrInvalidCredential)
	}
	if err := c.ValidateSuccessor(cloneCredential(old), cloneCredential(next)); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrInvalidLeafNode, ErrInvalidCredential, err)
	}
	return nil
}

// cloneCredential returns a copy of c that shares no memory with it, for
// the application's hooks.
func cloneCredential(c *Credential) Credential {
	out := Credential{CredentialType: c.CredentialType, Identity: bytes.Clone(c.Identity)}
	for _, cert := range c.Certificates {
		out.Certificates = append(out.Certificates, bytes.Clone(cert))
	}
	return out
}

// sameCredential compares two credentials by their whole encoding.
func sameCredential(a, b *Credential) bool {
	if a.CredentialType != b.CredentialType {
		return false
	}
	if a.CredentialType == CredentialTypeBasic {
		return bytes.Equal(a.Identity, b.Identity)
	}
	return bytes.Equal(marshal(a), marshal(b))
}

// credentialKey is a credential's encoding, as a map key.
func credentialKey(c *Credential) string { return string(marshal(c)) }

// checkCredentialUnique checks that no leaf of t other than l holds cred:
// one credential, one leaf.
func checkCredentialUnique(t *ratchetTree, l leafIndex, cred *Credential) error {
	for i := leafIndex(0); uint32(i) < t.size(); i++ {
		if ln := t.leafNode(i); ln != nil && i != l && sameCredential(&ln.Credential, cred) {
			return fmt.Errorf("%w: %w: leaf %d holds the same credential", ErrInvalidLeafNode, ErrInvalidCredential, i)
		}
	}
	return nil
}

// checkTreeCredentials checks a tree received to join a group: no two
// leaves hold the same credential. (Each leaf's credential is validated
// with the leaf, Section 7.3.)
func checkTreeCredentials(t *ratchetTree) error {
	seen := make(map[string]leafIndex, t.memberCount())
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		ln := t.leafNode(l)
		if ln == nil {
			continue
		}
		k := credentialKey(&ln.Credential)
		if o, dup := seen[k]; dup {
			return fmt.Errorf("%w: %w: leaves %d and %d hold the same credential", ErrInvalidWelcome, ErrInvalidCredential, o, l)
		}
		seen[k] = l
	}
	return nil
}
