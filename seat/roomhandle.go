package seat

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// Room is a handle on one room of a seat, by name: a bare name means
// <org>/rooms/<name>, anything with a slash is the room's channel.
//
// Making a handle does no I/O and cannot fail, because a handle is also
// how a seat creates or joins a room it is not in yet ([Room.Create],
// [Room.Join]). Whether the seat is in the room is checked by each call,
// against the home's state at that moment: a room left or removed from
// between two calls of one handle fails the second. A call about a room
// this seat is not in returns [ErrNoRoom], [ErrNotMember] or
// [ErrRemovedRoom] inside a [RoomError] naming the room; a call on a
// closed seat returns [ErrClosed].
//
// Every call that can block takes a context; the room's operations are
// serialized within the process and across processes sharing the home,
// so a call may wait for another (a watch applying an entry) first.
// Handles are cheap and safe for concurrent use.
type Room struct {
	s    *Seat
	name string
}

// Room returns the handle on the room called name.
func (s *Seat) Room(name string) *Room { return &Room{s: s, name: name} }

// Name is the room's name as given to [Seat.Room].
func (r *Room) Name() string { return r.name }

// begin refuses a call on a closed seat.
func (r *Room) begin() error {
	if r.s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// done names the room in err when err says this seat is not in it.
func (r *Room) done(err error) error {
	if err == nil {
		return nil
	}
	var re *RoomError
	if errors.As(err, &re) {
		return err
	}
	if errors.Is(err, ErrNoRoom) || errors.Is(err, ErrNotMember) || errors.Is(err, ErrRemovedRoom) {
		return &RoomError{Room: r.name, Err: err}
	}
	return err
}

// Channel returns the room's relay channel.
func (r *Room) Channel(ctx context.Context) (string, error) {
	if err := r.begin(); err != nil {
		return "", err
	}
	ch, err := r.s.roomChannel(ctx, r.name)
	return ch, r.done(err)
}

// Create registers the room's channel and creates its MLS group, with
// this seat as owner and only member, and returns the channel. A nil o
// means the defaults (the suite [Suite]). The home must not have the room
// yet ([ErrRoomExists]), and the channel must have no other members
// ([ErrRoomLive]).
func (r *Room) Create(ctx context.Context, o *RoomOptions) (string, error) {
	if err := r.begin(); err != nil {
		return "", err
	}
	if o == nil {
		o = &RoomOptions{}
	}
	ch, err := r.s.createRoom(ctx, r.name, *o)
	return ch, r.done(err)
}

// InviteOptions are the choices of an invite; the zero value means one
// use within one hour, admitted by the owner.
type InviteOptions struct {
	// Uses is how many joins the invite admits (1 to 100); zero means 1.
	Uses int
	// TTL is how long the invite is good for (60 s to 7 days); zero
	// means one hour.
	TTL time.Duration
	// Auto makes an invite whose holder joins by itself, with nobody
	// online to admit it: the invite is listed in the room with its uses
	// and lifetime, and every member's engine enforces them.
	Auto bool
}

// Invite mints an invite token to the room, which this seat owns. A nil o
// means the defaults of [InviteOptions].
func (r *Room) Invite(ctx context.Context, o *InviteOptions) (string, error) {
	if err := r.begin(); err != nil {
		return "", err
	}
	if o == nil {
		o = &InviteOptions{}
	}
	var tok string
	var err error
	if o.Auto {
		// A commit: through a watch of the home, if one runs.
		if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handAutoInvite, Room: r.name, Uses: o.Uses, TTL: o.TTL}); ok {
			return rep.Token, r.done(rep.err())
		}
		tok, err = r.s.autoInviteTo(ctx, r.name, o.Uses, o.TTL)
	} else {
		tok, err = r.s.inviteTo(ctx, r.name, o.Uses, o.TTL)
	}
	return tok, r.done(err)
}

// JoinOptions are the choices of a join.
type JoinOptions struct {
	// Wait is how long Join waits for the owner to admit this seat; zero
	// means it asks once and returns [ErrWelcomeWait] unless admitted
	// (a join by an auto invite completes at once).
	Wait time.Duration
}

// Join publishes a KeyPackage for the room with an invite token, waits up
// to o.Wait for the owner to admit this seat, joins from the Welcome and
// returns the room's channel. If the wait passes first it returns
// [ErrWelcomeWait]; joining again resumes waiting on the same request. A
// nil o means no wait.
func (r *Room) Join(ctx context.Context, token string, o *JoinOptions) (string, error) {
	if err := r.begin(); err != nil {
		return "", err
	}
	var wait time.Duration
	if o != nil {
		wait = o.Wait
	}
	ch, err := r.s.joinRoom(ctx, r.name, token, wait)
	return ch, r.done(err)
}

// Admit admits every pending join request of the room, which this seat
// owns, one add per commit: the commit goes to the relay first, and the
// Welcome to the directory only once the relay accepted it, so no Welcome
// is published for a commit the relay refused.
func (r *Room) Admit(ctx context.Context) ([]Admitted, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handAdmit, Room: r.name}); ok {
		return rep.Admitted, r.done(rep.err())
	}
	a, err := r.s.admitJoiners(ctx, r.name)
	return a, r.done(err)
}

// AddOptions are the choices of an add.
type AddOptions struct {
	// Token is an add-token the person made (skt_add_…), for an account
	// that shares no room or org with them; the claim uses one of its
	// uses.
	Token string
}

// Add adds a person to the room, which this seat owns or administers,
// from the offers their devices left at the directory, whether or not
// they are online: one leaf per device, and each Welcome left in the
// person's inbox, for their seat to accept. person is an account id, the
// person's did:key, or an add-token the person made (skt_add_…, see
// [Seat.ContactToken]), which names them; "" with o.Token adds the
// token's maker. The directory hands out offers only to an account that
// shares a room or an org with the person, or holds their add-token; else
// the add fails with [ErrNotAllowed]. Every offer must be the person's
// ([ErrNotThePerson]); offers the room's engine refuses (a device in the
// room already) are skipped.
func (r *Room) Add(ctx context.Context, person string, o *AddOptions) ([]Added, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	var token string
	if o != nil {
		token = o.Token
	}
	a, err := r.addBy(ctx, person, token)
	return a, r.done(err)
}

// addBy adds person with token, or by the add-token person is.
func (r *Room) addBy(ctx context.Context, person, token string) ([]Added, error) {
	if token == "" && strings.HasPrefix(person, addTokenPrefix) {
		person, token = "", person
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handAdd, Room: r.name, Member: person, Token: token}); ok {
		return rep.Added, rep.err()
	}
	return r.s.addPerson(ctx, r.name, person, token)
}

// Send sends text to the room and returns its seq. A watch of this home
// running in another process sends it on its connection, among its cover.
func (r *Room) Send(ctx context.Context, text string) (uint64, error) {
	if err := r.begin(); err != nil {
		return 0, err
	}
	seq, err := r.s.sendText(ctx, r.name, text)
	return seq, r.done(err)
}

// Sync catches the room up with the relay and returns the new messages:
// what entered the room's history meanwhile (notices included), read back
// from it as a watch does.
func (r *Room) Sync(ctx context.Context) ([]RoomMessage, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	m, err := r.s.syncNamed(ctx, r.name)
	return m, r.done(err)
}

// History returns the room's stored messages, oldest first, without
// asking the relay.
func (r *Room) History(ctx context.Context) ([]RoomMessage, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	m, err := r.s.historyOf(ctx, r.name)
	return m, r.done(err)
}

// Roster is a room's members at one epoch of its group.
type Roster struct {
	Members []RoomMember
	Epoch   uint64
}

// Members catches the room up and returns its roster.
func (r *Room) Members(ctx context.Context) (Roster, error) {
	if err := r.begin(); err != nil {
		return Roster{}, err
	}
	m, epoch, err := r.s.membersOf(ctx, r.name)
	return Roster{Members: m, Epoch: epoch}, r.done(err)
}

// Remove removes the member whose identity is did with a commit, then
// ends its account's channel membership at the directory, unless another
// identity of that account is still in the room. The account is the one
// the directory added when this home admitted the identity; for an
// identity this home did not admit (a join by auto invite, or by another
// member), the directory ends the membership of the accounts that joined
// under that identity, which only the channel's owner may ask. The commit
// is what cuts the member off from new messages; the membership stops the
// relay from serving it the ciphertext, and the directory's record of the
// removal keeps invites made before from readmitting it.
func (r *Room) Remove(ctx context.Context, did string) (Removal, error) {
	if err := r.begin(); err != nil {
		return Removal{}, err
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handRemove, Room: r.name, Member: did}); ok {
		var rm Removal
		if rep.Removal != nil {
			rm = *rep.Removal
		}
		return rm, r.done(rep.err())
	}
	rm, err := r.s.removeMember(ctx, r.name, did)
	return rm, r.done(err)
}

// Leave leaves the room: it proposes the removal of this seat's leaf
// (RFC 9420 §12.1.3; a member cannot commit its own removal), which the
// next owner or admin to see it commits and any member commits before it
// next sends; then it ends this account's membership of the room's
// channel at the directory and forgets the room on this seat. Every seat
// of the account loses the relay's service for the room, not only this
// one. If the relay or the directory cannot be reached, the room is kept
// and the error says why; leaving again retries. The owner cannot leave
// its room: for the owner, Leave only forgets the room on this seat.
func (r *Room) Leave(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handLeave, Room: r.name}); ok {
		return r.done(rep.err())
	}
	return r.done(r.s.leaveRoom(ctx, r.name))
}

// Rejoin takes this seat's place in the room again by external Commit
// from the GroupInfo the directory keeps, whatever the state this home
// has of it: for a room whose commits this seat missed, or whose state is
// lost (then the room comes back into this home).
func (r *Room) Rejoin(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handRejoin, Room: r.name}); ok {
		return r.done(rep.err())
	}
	return r.done(r.s.rejoinRoom(ctx, r.name))
}

// Decline drops every Welcome to the room waiting in this account's inbox
// (for any of its devices), so this person does not join it; the adder is
// told nothing, as when a Welcome expires unread. It returns how many were
// dropped, or [ErrNotPending]. The handle's name must be the room's
// channel, as [Seat.PendingRooms] lists it.
func (r *Room) Decline(ctx context.Context) (int, error) {
	if err := r.begin(); err != nil {
		return 0, err
	}
	n, err := r.s.declineRoom(ctx, r.name)
	return n, r.done(err)
}

// Roles catches the room up and returns its roles, or [ErrNoRoles] for a
// room created before rooms had roles.
func (r *Room) Roles(ctx context.Context) (RoomRoles, error) {
	if err := r.begin(); err != nil {
		return RoomRoles{}, err
	}
	roles, err := r.s.rolesOf(ctx, r.name)
	return roles, r.done(err)
}

// AddAdmin makes the member did an admin of the room, with a
// GroupContextExtensions Commit (RFC 9420 §12.1.7). Only the owner may;
// any other seat gets [ErrNotOwner] before anything is sent.
func (r *Room) AddAdmin(ctx context.Context, did string) error {
	if err := r.begin(); err != nil {
		return err
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handAddAdmin, Room: r.name, Member: did}); ok {
		return r.done(rep.err())
	}
	return r.done(r.s.addAdmin(ctx, r.name, did))
}

// RemoveAdmin makes the admin did a plain member again; see
// [Room.AddAdmin].
func (r *Room) RemoveAdmin(ctx context.Context, did string) error {
	if err := r.begin(); err != nil {
		return err
	}
	if rep, ok := r.s.handOff(ctx, handoffRequest{Kind: handRemoveAdmin, Room: r.name, Member: did}); ok {
		return r.done(rep.err())
	}
	return r.done(r.s.removeAdmin(ctx, r.name, did))
}

// Suite returns the room's cipher suite.
func (r *Room) Suite(ctx context.Context) (mls.CipherSuite, error) {
	if err := r.begin(); err != nil {
		return 0, err
	}
	cs, err := r.s.suiteOf(ctx, r.name)
	return cs, r.done(err)
}

// Watch follows the room live until ctx is done, then returns nil; see
// [Seat.WatchWith], which follows several rooms on one connection. A nil
// o watches without callbacks (the room is kept caught up).
func (r *Room) Watch(ctx context.Context, o *WatchOptions) error {
	if err := r.begin(); err != nil {
		return err
	}
	if o == nil {
		o = &WatchOptions{}
	}
	return r.done(r.s.WatchWith(ctx, []string{r.name}, *o))
}
