package seat

import (
	"context"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// The room methods of Seat below came before the [Room] handle. Each is a
// thin wrapper that keeps the behaviour (and the errors) it had; they go
// in the next release.

// RoomChannel turns a room name into its channel: a bare name means
// <org>/rooms/<name>.
//
// Deprecated: use s.Room(name).Channel.
func (s *Seat) RoomChannel(ctx context.Context, name string) (string, error) {
	return s.roomChannel(ctx, name)
}

// RoomCreate creates the room in the suite [Suite].
//
// Deprecated: use s.Room(name).Create.
func (s *Seat) RoomCreate(ctx context.Context, name string) (string, error) {
	return s.createRoom(ctx, name, RoomOptions{})
}

// RoomCreateWith creates the room with the choices of o.
//
// Deprecated: use s.Room(name).Create.
func (s *Seat) RoomCreateWith(ctx context.Context, name string, o RoomOptions) (string, error) {
	return s.createRoom(ctx, name, o)
}

// RoomInvite mints an invite the owner admits.
//
// Deprecated: use s.Room(name).Invite.
func (s *Seat) RoomInvite(ctx context.Context, name string, uses int, ttl time.Duration) (string, error) {
	return s.inviteTo(ctx, name, uses, ttl)
}

// RoomInviteAuto mints an invite whose holder joins by itself.
//
// Deprecated: use s.Room(name).Invite with [InviteOptions.Auto].
func (s *Seat) RoomInviteAuto(ctx context.Context, name string, uses int, ttl time.Duration) (string, error) {
	return s.autoInviteTo(ctx, name, uses, ttl)
}

// RoomJoin joins the room with an invite token, waiting up to wait.
//
// Deprecated: use s.Room(name).Join.
func (s *Seat) RoomJoin(ctx context.Context, name, token string, wait time.Duration) (string, error) {
	return s.joinRoom(ctx, name, token, wait)
}

// RoomAdmit admits every pending join request of the room.
//
// Deprecated: use s.Room(name).Admit.
func (s *Seat) RoomAdmit(ctx context.Context, name string) ([]Admitted, error) {
	return s.admitJoiners(ctx, name)
}

// RoomAdd adds a person (an account id, a did:key or an add-token).
//
// Deprecated: use s.Room(name).Add.
func (s *Seat) RoomAdd(ctx context.Context, name, person string) ([]Added, error) {
	return s.Room(name).addBy(ctx, person, "")
}

// RoomAddWith adds a person with their add-token.
//
// Deprecated: use s.Room(name).Add with [AddOptions.Token].
func (s *Seat) RoomAddWith(ctx context.Context, name, person, addToken string) ([]Added, error) {
	return s.addPerson(ctx, name, person, addToken)
}

// RoomSend sends text to the room and returns its seq.
//
// Deprecated: use s.Room(name).Send.
func (s *Seat) RoomSend(ctx context.Context, name, text string) (uint64, error) {
	return s.sendText(ctx, name, text)
}

// RoomSync catches the room up and returns the new messages.
//
// Deprecated: use s.Room(name).Sync.
func (s *Seat) RoomSync(ctx context.Context, name string) ([]RoomMessage, error) {
	return s.syncNamed(ctx, name)
}

// RoomHistory returns the room's stored messages, oldest first.
//
// Deprecated: use s.Room(name).History.
func (s *Seat) RoomHistory(ctx context.Context, name string) ([]RoomMessage, error) {
	return s.historyOf(ctx, name)
}

// RoomMembers catches the room up and returns its roster and epoch.
//
// Deprecated: use s.Room(name).Members.
func (s *Seat) RoomMembers(ctx context.Context, name string) ([]RoomMember, uint64, error) {
	return s.membersOf(ctx, name)
}

// RoomRemove removes the member whose identity is did.
//
// Deprecated: use s.Room(name).Remove.
func (s *Seat) RoomRemove(ctx context.Context, name, did string) error {
	_, err := s.removeMember(ctx, name, did)
	return err
}

// RoomRemoveMember removes the member whose identity is did.
//
// Deprecated: use s.Room(name).Remove.
func (s *Seat) RoomRemoveMember(ctx context.Context, name, did string) (Removal, error) {
	return s.removeMember(ctx, name, did)
}

// RoomLeave leaves the room.
//
// Deprecated: use s.Room(name).Leave.
func (s *Seat) RoomLeave(ctx context.Context, name string) error {
	return s.leaveRoom(ctx, name)
}

// RoomRejoin takes this seat's place in the room again by external Commit.
//
// Deprecated: use s.Room(name).Rejoin.
func (s *Seat) RoomRejoin(ctx context.Context, name string) error {
	return s.rejoinRoom(ctx, name)
}

// RoomDecline drops the Welcomes to the room on channel ch in the inbox.
//
// Deprecated: use s.Room(ch).Decline.
func (s *Seat) RoomDecline(ctx context.Context, ch string) (int, error) {
	return s.declineRoom(ctx, ch)
}

// RoomRolesOf catches the room up and returns its roles.
//
// Deprecated: use s.Room(name).Roles.
func (s *Seat) RoomRolesOf(ctx context.Context, name string) (RoomRoles, error) {
	return s.rolesOf(ctx, name)
}

// RoomAdminAdd makes the member did an admin of the room.
//
// Deprecated: use s.Room(name).AddAdmin.
func (s *Seat) RoomAdminAdd(ctx context.Context, name, did string) error {
	return s.addAdmin(ctx, name, did)
}

// RoomAdminRemove makes the admin did a plain member again.
//
// Deprecated: use s.Room(name).RemoveAdmin.
func (s *Seat) RoomAdminRemove(ctx context.Context, name, did string) error {
	return s.removeAdmin(ctx, name, did)
}

// RoomSuite returns the room's cipher suite.
//
// Deprecated: use s.Room(name).Suite.
func (s *Seat) RoomSuite(ctx context.Context, name string) (mls.CipherSuite, error) {
	return s.suiteOf(ctx, name)
}

// Watch follows rooms live, calling onMsg for every new message.
//
// Deprecated: use s.WatchWith, or s.Room(name).Watch for one room.
func (s *Seat) Watch(ctx context.Context, rooms []string, onMsg func(RoomMessage)) error {
	return s.WatchWith(ctx, rooms, WatchOptions{OnMessage: onMsg})
}
