package mls

import (
	"bytes"
	"fmt"
	"slices"
)

// This file holds the application's say over the Commits of members
// ([Config.CommitPolicy]). RFC 9420 leaves authorization to the
// application: Section 12.1.7 ("the application may ... restrict which
// members may propose GroupContextExtensions"), Section 12.2 (a Commit
// that "contains a proposal that the application considers invalid")
// and Section 12.4.2 (the recipient checks that the proposals "are all
// valid"). Because every member runs the same policy on every Commit it
// receives, a rule such as "only admins remove others" holds even against
// a member whose own software does not apply it.

// CommitCheck is a member's Commit, on which [Config.CommitPolicy]
// decides. It holds copies: the policy may keep or change them.
type CommitCheck struct {
	// GroupID and Epoch name the group and the epoch the Commit ends.
	GroupID []byte
	Epoch   uint64
	// Committer is the member that creates the Commit.
	Committer Member
	// Extensions are the GroupContext extensions in effect before the
	// Commit.
	Extensions []Extension
	// Proposals are the proposals the Commit applies: those it carries by
	// value and those it includes by reference.
	Proposals []CheckedProposal
	// ProposalOnly is set when the check is for one proposal that a member
	// sends or that this member receives, before it is cached (Section
	// 12.1: a proposal the application considers invalid need not wait
	// for a Commit to be refused). Committer is then the proposal's
	// sender, as though it committed the proposal alone.
	ProposalOnly bool
}

// CheckedProposal is one proposal of a [CommitCheck].
type CheckedProposal struct {
	Type ProposalType
	// Sender is who proposed it: the committer for a proposal by value,
	// the original sender for one by reference. SenderMember is that
	// member for a SenderTypeMember sender, nil otherwise.
	Sender       Sender
	SenderMember *Member
	// ByReference is set when the Commit includes the proposal by
	// reference (it was sent earlier as a proposal of its own).
	ByReference bool
	// Removed is the member a Remove removes.
	Removed *Member
	// Added is the member an Add adds (LeafIndex is 0: the leaf is known
	// only once the Commit is applied).
	Added *Member
	// Extensions is the new GroupContext extension list of a
	// GroupContextExtensions proposal.
	Extensions []Extension
	// Proposal is the whole proposal.
	Proposal *Proposal
}

// checkCommitPolicy asks the application's policy about a Commit by the
// member committer with the proposal list props. Without a policy every
// Commit that passes the checks of the RFC is allowed.
func (g *Group) checkCommitPolicy(committer leafIndex, props []committedProposal) error {
	return g.askCommitPolicy(committer, props, false)
}

// checkProposalPolicy asks the application's policy about one proposal of
// the member sender, when it is sent or received.
func (g *Group) checkProposalPolicy(sender Sender, p *Proposal) error {
	if g.cfg.CommitPolicy == nil || sender.SenderType != SenderTypeMember {
		return nil
	}
	return g.askCommitPolicy(leafIndex(sender.LeafIndex), []committedProposal{{proposal: *p, sender: sender, byRef: true}}, true)
}

func (g *Group) askCommitPolicy(committer leafIndex, props []committedProposal, single bool) error {
	if g.cfg.CommitPolicy == nil {
		return nil
	}
	ln := g.cur.tree.leafNode(committer)
	if ln == nil {
		return fmt.Errorf("%w: leaf %d", ErrUnknownSender, committer)
	}
	chk := CommitCheck{
		GroupID:      bytes.Clone(g.cur.ctx.GroupID),
		Epoch:        g.cur.ctx.Epoch,
		Committer:    g.policyMember(committer),
		Extensions:   cloneExtensions(g.cur.ctx.Extensions),
		Proposals:    make([]CheckedProposal, 0, len(props)),
		ProposalOnly: single,
	}
	for i := range props {
		p := &props[i]
		var cp Proposal
		if err := unmarshal(marshal(&p.proposal), &cp); err != nil {
			return invalidProposal("proposal does not re-encode")
		}
		c := CheckedProposal{Type: cp.ProposalType, Sender: p.sender, ByReference: p.byRef, Proposal: &cp}
		if p.sender.SenderType == SenderTypeMember && g.cur.tree.leafNode(leafIndex(p.sender.LeafIndex)) != nil {
			m := g.policyMember(leafIndex(p.sender.LeafIndex))
			c.SenderMember = &m
		}
		switch {
		case cp.ProposalType == ProposalTypeRemove && cp.Remove != nil:
			if g.cur.tree.leafNode(leafIndex(cp.Remove.Removed)) != nil {
				m := g.policyMember(leafIndex(cp.Remove.Removed))
				c.Removed = &m
			}
		case cp.ProposalType == ProposalTypeAdd && cp.Add != nil:
			m := memberOf(0, &cp.Add.KeyPackage.LeafNode)
			c.Added = &m
		case cp.ProposalType == ProposalTypeGroupContextExtensions && cp.GroupContextExtensions != nil:
			c.Extensions = cloneExtensions(cp.GroupContextExtensions.Extensions)
		}
		chk.Proposals = append(chk.Proposals, c)
	}
	if err := g.cfg.CommitPolicy(chk); err != nil {
		return fmt.Errorf("%w: %w", ErrRefusedByPolicy, err)
	}
	return nil
}

// policyMember is the member at leaf l of the current tree, as a copy.
func (g *Group) policyMember(l leafIndex) Member {
	m := memberOf(l, g.cur.tree.leafNode(l))
	m.Credential = cloneCredential(&m.Credential)
	return m
}

func cloneExtensions(exts []Extension) []Extension {
	out := slices.Clone(exts)
	for i := range out {
		out[i].ExtensionData = bytes.Clone(out[i].ExtensionData)
	}
	return out
}
