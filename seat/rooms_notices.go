package seat

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// Notices in a room's history.
const (
	// NoticeRemoved: Sender's commit removed this seat from the room; the
	// seat reads nothing of the room after it.
	NoticeRemoved = "removed"

	// Membership notices, for watches: kept in the history table (so a
	// watch learns of the commits another handle of the home made) but
	// left out of Room.History and Room.Sync. Text is the person (a did:key)
	// the change is about, Sender the member whose commit made it.
	//
	// NoticeJoined: Text came in by a join of its own (an invite).
	NoticeJoined = "joined"
	// NoticeAdded: Sender added Text.
	NoticeAdded = "added"
	// NoticeLeft: Text left the room.
	NoticeLeft = "left"
	// NoticeRemovedMember: Sender removed Text.
	NoticeRemovedMember = "removed-member"
	// NoticeRole: Sender's commit changed the role of Text (now the
	// room's owner, admin or member; see RoomRoles).
	NoticeRole = "role"

	// noticeMembers is the history row of one commit's membership
	// notices.
	noticeMembers = "members"
)

// commitNotices are the membership notices of a commit at seq by
// committer that took r's group from the members before (with the roles
// rolesBefore) to its members now.
func (s *Seat) commitNotices(r *room, seq uint64, at time.Time, committer string, before []mls.Member, leavers []string, rolesBefore RoomRoles) []RoomMessage {
	rolesAfter, _, _ := rolesIn(r.g.Extensions())
	base := RoomMessage{Room: r.channel, Seq: seq, Time: at}
	ns := membershipNotices(base, committer, PersonOf(selfIdentity(r.g)), before, r.g.Members(), leavers, rolesBefore, rolesAfter)
	if len(ns) == 0 {
		return nil
	}
	base.Kind, base.Sender, base.Text = noticeMembers, PersonOf(committer), packNotices(ns)
	return []RoomMessage{base}
}

// noticeEntry is one notice in a noticeMembers row.
type noticeEntry struct {
	Kind string `json:"k"`
	Who  string `json:"w"`
	Role string `json:"r,omitempty"`
}

// packNotices is the text of the history row of one commit's notices (the
// history keeps one row per seq): JSON, since the identities in it are
// the members' own strings, which may hold any character.
func packNotices(ns []RoomMessage) string {
	es := make([]noticeEntry, len(ns))
	for i, n := range ns {
		es[i] = noticeEntry{n.Kind, n.Text, n.Role}
	}
	b, _ := json.Marshal(es)
	return string(b)
}

// leavers are the persons of members whose pending proposals remove
// their own leaf: the commit that takes them is their leaving.
func leavers(g *mls.Group, members []mls.Member) []string {
	var out []string
	for _, p := range g.PendingProposals() {
		if p.Proposal.Remove == nil || p.Sender.SenderType != mls.SenderTypeMember || p.Sender.LeafIndex != p.Proposal.Remove.Removed {
			continue
		}
		for _, m := range members {
			if m.LeafIndex == p.Sender.LeafIndex {
				out = append(out, PersonOf(m.Identity))
			}
		}
	}
	return out
}

// splitNotices turns a noticeMembers row back into its notices.
func splitNotices(m RoomMessage) []RoomMessage {
	var es []noticeEntry
	if json.Unmarshal([]byte(m.Text), &es) != nil {
		return nil
	}
	var out []RoomMessage
	for _, e := range es {
		if !isMembershipNotice(e.Kind) {
			continue
		}
		n := m
		n.Kind, n.Text, n.Role = e.Kind, e.Who, e.Role
		out = append(out, n)
	}
	return out
}

// isMembershipNotice reports whether kind is one of the membership
// notices a watch gets.
func isMembershipNotice(kind string) bool {
	switch kind {
	case NoticeJoined, NoticeAdded, NoticeLeft, NoticeRemovedMember, NoticeRole:
		return true
	}
	return false
}

// membershipNotices are the membership changes a commit by committer made:
// the persons whose last leaf went (left or removed), whose first leaf
// came (joined or added), and whose role changed, in the order of before
// and after. A person who proposed their own removal (leavers) left. self
// is this seat's person, whose own removal is NoticeRemoved instead.
func membershipNotices(base RoomMessage, committer, self string, before, after []mls.Member, leavers []string, rolesBefore, rolesAfter RoomRoles) []RoomMessage {
	persons := func(ms []mls.Member) []string {
		var out []string
		for _, m := range ms {
			if p := PersonOf(m.Identity); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	was, is := persons(before), persons(after)
	by := PersonOf(committer)
	var out []RoomMessage
	note := func(kind, who string) {
		m := base
		m.Kind, m.Text, m.Sender = kind, who, by
		out = append(out, m)
	}
	for _, p := range was {
		switch {
		case slices.Contains(is, p) || p == self:
		case p == by || slices.Contains(leavers, p):
			note(NoticeLeft, p)
		default:
			note(NoticeRemovedMember, p)
		}
	}
	for _, p := range is {
		switch {
		case slices.Contains(was, p):
			if rolesBefore.Owner != "" && rolesBefore.Role(p) != rolesAfter.Role(p) {
				note(NoticeRole, p)
				out[len(out)-1].Role = rolesAfter.Role(p)
			}
		case p == by:
			note(NoticeJoined, p)
		default:
			note(NoticeAdded, p)
		}
	}
	return out
}
