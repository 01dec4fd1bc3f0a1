package mls

import "fmt"

// This file protects application messages (RFC 9420, Section 6.3). They
// are always PrivateMessages. Received application messages are handled by
// [Group.Process], which accepts messages from the current epoch and from
// a bounded window of past epochs ([Config.MaxPastEpochs]); within an
// epoch, generations may arrive out of order up to [Config.MaxForwardSkip]
// ahead, and every key is deleted once used (Section 9.2).

// Protect encrypts application data for the group in the current epoch.
// authenticatedData is sent in the clear but authenticated. The padding
// follows [Config.Padding].
func (g *Group) Protect(data, authenticatedData []byte) ([]byte, error) {
	if err := g.checkCanSend(); err != nil {
		return nil, err
	}
	// Receivers refuse any vector longer than maxVectorLen, so a longer
	// message could never be read (and could not be encoded past 2^30).
	if len(data) > maxVectorLen || len(authenticatedData) > maxVectorLen {
		return nil, fmt.Errorf("mls: application message longer than %d bytes", maxVectorLen)
	}
	// Section 12.4: a member that has seen proposals in the epoch must
	// commit them before sending application data. It always can: a
	// Commit leaves out the pending proposals that are not valid.
	if len(g.proposals) > 0 {
		return nil, fmt.Errorf("%w (%d)", ErrPendingProposals, len(g.proposals))
	}
	fc := &framedContent{
		GroupID:           g.cur.ctx.GroupID,
		Epoch:             g.cur.ctx.Epoch,
		Sender:            Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)},
		AuthenticatedData: authenticatedData,
		ContentType:       ContentTypeApplication,
		ApplicationData:   data,
	}
	ac, err := g.signContent(WireFormatPrivateMessage, fc, g.cur.ctx)
	if err != nil {
		return nil, err
	}
	return g.encodeContent(ac)
}
