package seat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/skytale-oss/skytale/mls"
)

// RoomMember is one member of a room: one leaf of its group.
type RoomMember struct {
	// Identity is the leaf's member identity, and Person the did:key of
	// the person it names: the same, or the person one of whose devices
	// the leaf is (see [DeviceIdentity]).
	Identity string
	Person   string
	Leaf     uint32
	Self     bool
	// Role is RoleOwner, RoleAdmin or RoleMember, from the roles in the
	// group (roles.go); "" in a room created before rooms had roles.
	Role string
	// Name is the name the person gave in the room, "" if none.
	Name string
}

// membersOf is [Room.Members] on the room called name.
func (s *Seat) membersOf(ctx context.Context, name string) ([]RoomMember, uint64, error) {
	var out []RoomMember
	var epoch uint64
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUpSettled(ctx, r, nil); err != nil {
			return err
		}
		if !r.g.Active() {
			return ErrRemovedRoom
		}
		roles, has, err := rolesIn(r.g.Extensions())
		if err != nil {
			return err
		}
		names, err := s.roomNames(ctx, r.channel)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, m := range r.g.Members() {
			rm := RoomMember{Name: names[PersonOf(m.Identity)], Identity: m.Identity, Person: PersonOf(m.Identity), Leaf: m.LeafIndex, Self: m.LeafIndex == r.g.LeafIndex()}
			if has {
				rm.Role = roles.Role(m.Identity)
			}
			out = append(out, rm)
		}
		epoch = r.g.Epoch()
		return nil
	})
	return out, epoch, err
}

// Removal is what [Room.Remove] did besides the commit.
type Removal struct {
	// AccountID is the removed identity's directory account, if this home
	// learned it when admitting the identity, or the directory ended the
	// membership of the account that joined under it; "" if not.
	AccountID string
	// MembershipEnded reports that the account's channel membership was
	// ended at the directory, so the relay no longer carries the room's
	// traffic for it.
	MembershipEnded bool
	// OtherSeats reports that the membership was kept because other
	// identities of the same account are still in the room.
	OtherSeats bool
	// OwnerEnds reports that this seat, not the room's owner, removed a
	// member it did not admit: only the owner ends such a membership, and
	// its seat does when it next reads the room.
	OwnerEnds bool
}

// removeMember is [Room.Remove] on the room called name.
func (s *Seat) removeMember(ctx context.Context, name, did string) (Removal, error) {
	var rm Removal
	var ch string
	var remaining, removed []string
	var owner, inGroup bool
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		ch, owner = r.channel, r.role == "owner"
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		removed = removed[:0]
		for _, m := range r.g.Members() {
			if slices.Contains(leavesOf(r.g, did), m.LeafIndex) {
				removed = append(removed, m.Identity)
			}
		}
		inGroup = len(removed) > 0
		if inGroup {
			// Every member refuses a Commit that breaks the room's roles
			// (roles.go); say so before building one.
			if err := checkMayRemove(r.g, did); err != nil {
				return err
			}
		}
		// Out of the group already: an earlier removal whose membership
		// change failed; finish it.
		if !inGroup {
			removed = []string{did}
		} else {
			_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
				leaves := leavesOf(r.g, did)
				if len(leaves) == 0 {
					return nil, fmt.Errorf("seat: %s is not a member of %s", did, r.channel)
				}
				opts := mls.CommitOptions{Remove: leaves}
				if PersonOf(did) != PersonOf(selfIdentity(r.g)) {
					// The person is barred from the invites the room
					// lists now, in the same commit (invites.go).
					exts, changed, err := withBarred(r.g.Extensions(), []string{did})
					if err != nil {
						return nil, err
					}
					if changed {
						opts.Extensions = exts
					}
				}
				return r.g.Commit(opts)
			})
			if err != nil {
				return err
			}
		}
		remaining = remaining[:0]
		for _, m := range r.g.Members() {
			remaining = append(remaining, m.Identity)
		}
		return nil
	})
	if err != nil {
		return rm, err
	}
	err = s.st.db.QueryRowContext(ctx, `SELECT account_id FROM room_accounts WHERE channel = ? AND identity = ?`, ch, did).Scan(&rm.AccountID)
	if errors.Is(err, sql.ErrNoRows) {
		if !owner {
			// Only the owner ends memberships by identity; its seat does
			// when it reads this commit (endDeparted).
			rm.OwnerEnds = true
			return rm, nil
		}
		return s.removeIdentities(ctx, ch, did, removed, inGroup)
	}
	if err != nil {
		return rm, err
	}
	// The other identities recorded for the same account, in one read; a
	// failed read ends nothing rather than guess.
	rows, err := s.st.db.QueryContext(ctx, `SELECT identity FROM room_accounts WHERE channel = ? AND account_id = ? AND identity <> ?`, ch, rm.AccountID, did)
	if err != nil {
		return rm, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return rm, err
		}
		if slices.Contains(remaining, id) {
			rm.OtherSeats = true
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return rm, err
	}
	if !rm.OtherSeats {
		key, err := s.apiKey(ctx)
		if err != nil {
			return rm, err
		}
		if err := s.directory(key).RemoveMember(ctx, ch, rm.AccountID); err != nil {
			return rm, fmt.Errorf("seat: %s is out of the room, but its account's membership of %s could not be ended (remove it again to retry): %w", did, ch, err)
		}
		rm.MembershipEnded = true
	}
	_, err = s.st.db.ExecContext(ctx, `DELETE FROM room_accounts WHERE channel = ? AND identity = ?`, ch, did)
	return rm, err
}

// removeIdentities ends, at the directory, the channel membership of the
// accounts that joined ch under the identities ids, removed from the
// group now (committed) or before, as did.
func (s *Seat) removeIdentities(ctx context.Context, ch, did string, ids []string, committed bool) (Removal, error) {
	var rm Removal
	key, err := s.apiKey(ctx)
	if err != nil {
		return rm, err
	}
	dir := s.directory(key)
	for _, id := range ids {
		ans, err := dir.RemoveIdentity(ctx, ch, id)
		if err != nil {
			return rm, fmt.Errorf("seat: %s is out of the room, but the membership of %s it joined under could not be ended (remove it again to retry): %w", did, ch, err)
		}
		if len(ans.Ended) > 0 {
			rm.AccountID, rm.MembershipEnded = ans.Ended[0], true
		}
		rm.OtherSeats = rm.OtherSeats || ans.Kept
	}
	if !committed && rm.AccountID == "" && !rm.OtherSeats {
		// Neither in the group nor recorded anywhere.
		return rm, fmt.Errorf("seat: %s is not a member of %s", did, ch)
	}
	return rm, nil
}

// rememberAccount records that identity in ch is the directory account
// account (room_accounts), learned when this home admitted it, so that
// removing the identity ends the account's channel membership too
// (removeMember, endRemovedMemberships). Every path by which this
// home admits someone by account comes here: a join request admitted, a
// Room.Add by account, did:key or add-token. Joins by auto invite are
// recorded by the directory instead (channel_identities), and checked by
// the owner's and admins' seats (checkInviteJoiners). Best effort: without
// the record, the removal ends the membership by identity, which only the
// owner may ask.
func (s *Seat) rememberAccount(ctx context.Context, ch, identity, account string) {
	if account == "" {
		return
	}
	s.st.db.ExecContext(ctx, `INSERT INTO room_accounts(channel, identity, account_id) VALUES (?, ?, ?)
		ON CONFLICT (channel, identity) DO UPDATE SET account_id = excluded.account_id`, ch, identity, account)
}

// leavesOf lists the leaves of g that did names, other than this
// member's own: the one leaf whose identity it is, or, for a person's
// did:key, every leaf of that person (see [DeviceIdentity]).
func leavesOf(g *mls.Group, did string) []uint32 {
	var out []uint32
	for _, m := range g.Members() {
		if m.LeafIndex != g.LeafIndex() && (m.Identity == did || PersonOf(m.Identity) == did) {
			out = append(out, m.LeafIndex)
		}
	}
	return out
}
