package seat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/skytale-oss/skytale/mls"
)

// Room roles. A room's roles live in its MLS group, in a GroupContext
// extension of the application's own (RFC 9420 §13: extensions; §17.3:
// 0xF000-0xFFFF is the private-use range). The room's creator is its
// owner; the owner may name admins. Every member's engine checks every
// Commit against the rules below (roleRules, run as the group's
// mls.Config.CommitPolicy), so a member whose software ignores them has
// its Commit refused by everyone else; a newcomer learns the roles from
// the GroupContext in its Welcome.
//
// The rules:
//   - only the owner and admins add members and remove others;
//   - any member may remove itself (a Remove proposal for its own leaf,
//     which any member's next Commit may include);
//   - nobody removes the owner but the owner itself;
//   - only the owner changes the roles, in its own Commit (a
//     GroupContextExtensions proposal of the owner's, RFC 9420 §12.1.7),
//     and the owner stays the owner; the roles extension is never dropped;
//   - other GroupContext changes are for the owner and admins;
//   - nobody proposes a ReInit (RFC 9420 §12.1.5; rooms do not use it).
//
// Rooms created before roles existed carry no roles extension. In them
// every member may still add and remove anyone, as before (no member
// could tell who created the room from the group alone), and nobody may
// introduce a roles extension later, since whoever did would make itself
// the owner.

// RolesExtensionType is the GroupContext extension type of a room's
// roles, from the private-use range of RFC 9420 §17.3.
const RolesExtensionType mls.ExtensionType = 0xFF0A

// Limits of the roles encoding.
const (
	maxRoleDIDLen = 128
	maxAdmins     = 256
)

// Role names, as RoomMember.Role shows them.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// RoomRoles are the roles of a room: the owner's did:key and the admins'
// did:keys, sorted and distinct, never including the owner.
//
// Encoding (RFC 9420 §2.1 presentation language, with its variable-size
// vector lengths, §2.1.2):
//
//	struct {
//	    opaque owner<V>;          // a did:key
//	    opaque admins<V><V>;      // did:keys, sorted, distinct
//	} RoomRoles;
type RoomRoles struct {
	Owner  string
	Admins []string
}

// Role returns the role of the member whose identity is id: the role of
// the person it names ([PersonOf]), whichever of the person's devices it
// is.
func (r *RoomRoles) Role(id string) string {
	switch did := PersonOf(id); {
	case did == r.Owner:
		return RoleOwner
	case slices.Contains(r.Admins, did):
		return RoleAdmin
	}
	return RoleMember
}

// manages reports whether the member whose identity is id may add and
// remove others.
func (r *RoomRoles) manages(id string) bool { return r.Role(id) != RoleMember }

// MarshalBinary encodes the roles. It fails on roles the decoder would
// refuse.
func (r *RoomRoles) MarshalBinary() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	var list []byte
	for _, a := range r.Admins {
		list = appendVec(list, []byte(a))
	}
	out := appendVec(nil, []byte(r.Owner))
	return appendVec(out, list), nil
}

// UnmarshalRoomRoles decodes roles, refusing anything malformed: lengths
// that are not minimally encoded or exceed the limits, trailing bytes,
// identities that are not did:keys, admins out of order or repeated, and
// the owner listed as an admin. A decoded value re-encodes to the same
// bytes.
func UnmarshalRoomRoles(data []byte) (RoomRoles, error) {
	var r RoomRoles
	owner, rest, err := readVec(data, maxRoleDIDLen)
	if err != nil {
		return r, err
	}
	list, rest, err := readVec(rest, maxAdmins*(maxRoleDIDLen+2))
	if err != nil {
		return r, err
	}
	if len(rest) != 0 {
		return r, errors.New("seat: roles: trailing bytes")
	}
	r.Owner = string(owner)
	for len(list) > 0 {
		var a []byte
		if a, list, err = readVec(list, maxRoleDIDLen); err != nil {
			return RoomRoles{}, err
		}
		if len(r.Admins) == maxAdmins {
			return RoomRoles{}, errors.New("seat: roles: too many admins")
		}
		r.Admins = append(r.Admins, string(a))
	}
	if err := r.check(); err != nil {
		return RoomRoles{}, err
	}
	return r, nil
}

func (r *RoomRoles) check() error {
	if _, err := ParseDIDKey(r.Owner); err != nil {
		return fmt.Errorf("seat: roles: owner: %w", err)
	}
	if len(r.Admins) > maxAdmins {
		return errors.New("seat: roles: too many admins")
	}
	for i, a := range r.Admins {
		if _, err := ParseDIDKey(a); err != nil {
			return fmt.Errorf("seat: roles: admin: %w", err)
		}
		if a == r.Owner {
			return errors.New("seat: roles: the owner is listed as an admin")
		}
		if i > 0 && r.Admins[i-1] >= a {
			return errors.New("seat: roles: admins not sorted and distinct")
		}
	}
	return nil
}

// appendVec appends data with its variable-size length (RFC 9420 §2.1.2).
func appendVec(b, data []byte) []byte {
	n := len(data)
	switch {
	case n < 1<<6:
		b = append(b, byte(n))
	case n < 1<<14:
		b = append(b, byte(n>>8)|0x40, byte(n))
	default:
		b = append(b, byte(n>>24)|0x80, byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, data...)
}

// readVec reads a variable-size vector of at most max bytes (RFC 9420
// §2.1.2: the length in its minimal encoding).
func readVec(b []byte, max int) (data, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, errors.New("seat: roles: truncated")
	}
	var n, size int
	switch b[0] >> 6 {
	case 0:
		n, size = int(b[0]&0x3f), 1
	case 1:
		if len(b) < 2 {
			return nil, nil, errors.New("seat: roles: truncated")
		}
		n, size = int(b[0]&0x3f)<<8|int(b[1]), 2
		if n < 1<<6 {
			return nil, nil, errors.New("seat: roles: length not minimally encoded")
		}
	case 2:
		if len(b) < 4 {
			return nil, nil, errors.New("seat: roles: truncated")
		}
		n, size = int(b[0]&0x3f)<<24|int(b[1])<<16|int(b[2])<<8|int(b[3]), 4
		if n < 1<<14 {
			return nil, nil, errors.New("seat: roles: length not minimally encoded")
		}
	default:
		return nil, nil, errors.New("seat: roles: invalid length")
	}
	if n > max {
		return nil, nil, errors.New("seat: roles: too long")
	}
	if len(b)-size < n {
		return nil, nil, errors.New("seat: roles: truncated")
	}
	return b[size : size+n], b[size+n:], nil
}

// rolesIn returns the roles in a GroupContext extension list; ok is false
// when there is no roles extension.
func rolesIn(exts []mls.Extension) (r RoomRoles, ok bool, err error) {
	data := extensionData(exts, RolesExtensionType)
	if data == nil {
		return RoomRoles{}, false, nil
	}
	r, err = UnmarshalRoomRoles(data)
	return r, true, err
}

// rolesExtension returns exts with the roles extension set to r.
func rolesExtension(exts []mls.Extension, r *RoomRoles) ([]mls.Extension, error) {
	data, err := r.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return withExtension(exts, RolesExtensionType, data), nil
}

// roleRules is the seat's mls.Config.CommitPolicy: the rules at the top
// of this file, checked on every Commit this seat makes or receives
// (RFC 9420 §12.2 and §12.4.2: a Commit with a proposal the application
// considers invalid is invalid).
func roleRules(c mls.CommitCheck) error {
	roles, has, err := rolesIn(c.Extensions)
	if err != nil {
		return err
	}
	oldData := extensionData(c.Extensions, RolesExtensionType)
	for _, p := range c.Proposals {
		if p.Type == mls.ProposalTypeReInit {
			return errors.New("seat: rooms are never reinitialized")
		}
		if !has {
			// A room from before roles: everything as before, but no
			// roles can be introduced.
			if p.Type == mls.ProposalTypeGroupContextExtensions && extensionData(p.Extensions, RolesExtensionType) != nil {
				return errors.New("seat: roles cannot be added to a room created without them")
			}
			continue
		}
		if p.SenderMember == nil {
			return errors.New("seat: a room commits only members' proposals")
		}
		sender := PersonOf(p.SenderMember.Identity)
		switch p.Type {
		case mls.ProposalTypeAdd:
			// A person adds its own devices (devicerooms.go).
			if !roles.manages(sender) && (p.Added == nil || PersonOf(p.Added.Identity) != sender) {
				return fmt.Errorf("%w (add by %s)", ErrNotAdmin, sender)
			}
		case mls.ProposalTypeRemove:
			if p.Removed == nil {
				return errors.New("seat: remove of no member")
			}
			if p.Removed.LeafIndex == p.SenderMember.LeafIndex && sender == roles.Owner {
				return ErrRemoveOwner // the owner cannot leave
			}
			removed := PersonOf(p.Removed.Identity)
			if removed == sender {
				continue // leaving, or a person removing one of its devices: any member may commit it
			}
			if removed == roles.Owner {
				return ErrRemoveOwner
			}
			if !roles.manages(sender) {
				return fmt.Errorf("%w (remove by %s)", ErrNotAdmin, sender)
			}
		case mls.ProposalTypeGroupContextExtensions:
			newData := extensionData(p.Extensions, RolesExtensionType)
			if newData == nil {
				return errors.New("seat: the room's roles cannot be dropped")
			}
			if !bytes.Equal(newData, oldData) {
				next, err := UnmarshalRoomRoles(newData)
				if err != nil {
					return err
				}
				if sender != roles.Owner || PersonOf(c.Committer.Identity) != roles.Owner {
					return fmt.Errorf("%w: only the owner's commits change the roles", ErrNotOwner)
				}
				if next.Owner != roles.Owner {
					return errors.New("seat: the room's owner stays its owner")
				}
			} else if !roles.manages(sender) {
				return fmt.Errorf("%w (extensions by %s)", ErrNotAdmin, sender)
			}
		}
	}
	return nil
}

// extensionData is the data of extension t in exts, nil when absent.
func extensionData(exts []mls.Extension, t mls.ExtensionType) []byte {
	for _, e := range exts {
		if e.ExtensionType == t {
			if e.ExtensionData == nil {
				return []byte{}
			}
			return e.ExtensionData
		}
	}
	return nil
}

// selfIdentity is the did:key of this member's leaf in g.
func selfIdentity(g *mls.Group) string {
	for _, m := range g.Members() {
		if m.LeafIndex == g.LeafIndex() {
			return m.Identity
		}
	}
	return ""
}

// checkMayRemove checks, before any Commit is built, that this member may
// remove did (a person, or one member identity) from g under the room's
// roles.
func checkMayRemove(g *mls.Group, did string) error {
	roles, has, err := rolesIn(g.Extensions())
	if err != nil || !has {
		return err
	}
	self := selfIdentity(g)
	if PersonOf(did) == PersonOf(self) {
		return nil
	}
	if PersonOf(did) == roles.Owner {
		return ErrRemoveOwner
	}
	if !roles.manages(self) {
		return ErrNotAdmin
	}
	return nil
}

// rolesOf is [Room.Roles] on the room called name.
func (s *Seat) rolesOf(ctx context.Context, name string) (RoomRoles, error) {
	var out RoomRoles
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		roles, has, err := rolesIn(r.g.Extensions())
		if err != nil {
			return err
		}
		if !has {
			return ErrNoRoles
		}
		out = roles
		return nil
	})
	return out, err
}

// addAdmin is [Room.AddAdmin] on the room called name.
func (s *Seat) addAdmin(ctx context.Context, name, did string) error {
	if _, err := ParseDIDKey(did); err != nil {
		return err
	}
	return s.changeRoles(ctx, name, func(r *RoomRoles) error {
		if did == r.Owner {
			return errors.New("seat: the owner is not made an admin")
		}
		if !slices.Contains(r.Admins, did) {
			r.Admins = append(r.Admins, did)
			slices.Sort(r.Admins)
		}
		return nil
	})
}

// removeAdmin is [Room.RemoveAdmin] on the room called name.
func (s *Seat) removeAdmin(ctx context.Context, name, did string) error {
	return s.changeRoles(ctx, name, func(r *RoomRoles) error {
		i := slices.Index(r.Admins, did)
		if i < 0 {
			return fmt.Errorf("seat: %s is not an admin of the room", did)
		}
		r.Admins = slices.Delete(r.Admins, i, i+1)
		return nil
	})
}

// changeRoles commits the roles that change makes of the room's current
// ones, as the owner.
func (s *Seat) changeRoles(ctx context.Context, name string, change func(*RoomRoles) error) error {
	return s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		if !r.g.Active() {
			return ErrRemovedRoom
		}
		_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
			exts := r.g.Extensions()
			roles, has, err := rolesIn(exts)
			if err != nil {
				return nil, err
			}
			if !has {
				return nil, ErrNoRoles
			}
			if selfIdentity(r.g) != roles.Owner {
				return nil, ErrNotOwner
			}
			if err := change(&roles); err != nil {
				return nil, err
			}
			next, err := rolesExtension(exts, &roles)
			if err != nil {
				return nil, err
			}
			return r.g.Commit(mls.CommitOptions{Extensions: next})
		})
		return err
	})
}
