package seat

import "errors"

// The errors of this package are the sentinels below, matched with
// errors.Is, and three typed errors with fields a caller reads:
// [RoomError] (the room an error is about), [APIError] (a plane's answer,
// with its code and Retry-After) and [FrameError] (a relay error frame).

// Errors of the home and its account.
var (
	// ErrNoSeed: the home has no seed yet; Init or Restore makes one.
	ErrNoSeed = errors.New("seat: no seed in this home")

	// ErrSeedExists: Init or Restore on a home that has a seed already.
	ErrSeedExists = errors.New("seat: this home already has a seed")

	// ErrNotSignedIn: the call needs a directory account and the home has
	// none; SignIn or UseAccount gives it one.
	ErrNotSignedIn = errors.New("seat: not signed in")

	// ErrNotConnected was the refusal of a call that needed Connect first.
	//
	// Deprecated: no call returns it: a home that has not connected
	// pushes and pulls with its account's key. It goes in the next
	// release.
	ErrNotConnected = errors.New("seat: not connected")

	// ErrSignedIn: SignIn on a home that has an account already.
	ErrSignedIn = errors.New("seat: already signed in")

	// ErrOrgTaken: signup named an org that exists; joining it takes an
	// org invite from one of its accounts.
	ErrOrgTaken = errors.New("seat: the org exists and joining it needs an org invite")

	// ErrInvalidOrgInvite: the org invite is unknown, expired, used up or
	// for another org.
	ErrInvalidOrgInvite = errors.New("seat: the org invite is invalid, expired, used up or for another org")

	// ErrNoDirectoryURL: the call needs the directory and [Config.APIURL] is
	// empty.
	ErrNoDirectoryURL = errors.New("seat: no directory URL configured")

	// ErrNoRelayURL: the call needs the relay and [Config.RelayURL] is empty.
	ErrNoRelayURL = errors.New("seat: no relay URL configured")

	// ErrName: a name that is empty, too long, not UTF-8, or has control or
	// formatting characters (which could reorder or hide what is shown).
	ErrName = errors.New("seat: a name is 1 to 64 bytes of printable UTF-8")

	// ErrNotDIDKey: an identity that is not an Ed25519 did:key.
	ErrNotDIDKey = errors.New("seat: not an Ed25519 did:key")

	// ErrClosed: a call on a seat after [Seat.Close].
	ErrClosed = errors.New("seat: the seat is closed")
)

// Errors of sealed sync batches.
var (
	// ErrNotSealed means the bytes are not a sealed batch at all (no magic),
	// for example an MLS message on the same channel.
	ErrNotSealed = errors.New("seat: not a sealed batch")

	// ErrOpen means a sealed batch did not authenticate: it was sealed under
	// another key or for another channel, or it was altered or truncated.
	ErrOpen = errors.New("seat: sealed batch does not open: wrong key, wrong channel or altered bytes")

	// ErrTooLarge means the entries do not fit in one sealed batch; see
	// [SyncKey.SealAll].
	ErrTooLarge = errors.New("seat: batch larger than the relay's payload limit")
)

// Errors of the relay and the directory answering.
var (
	// ErrStaleEpoch: the relay refused a commit for an epoch other than
	// the one it expects next (matched by a [FrameError] with code
	// stale_epoch, whose Epoch is the expected one); the committer
	// catches up and builds its commit again.
	ErrStaleEpoch = errors.New("seat: stale epoch")

	// ErrTryAgainLater is wrapped by the error of a connection the relay
	// closed with 1013 Try Again Later, and matched by the error frame it
	// sends first: the relay was full and closed this socket (the one idle
	// longest, or silent longest before its login), or the account holds too
	// many sockets. Reconnect after a backoff, as a watch does.
	ErrTryAgainLater = errors.New("seat: relay busy, try again later")

	// ErrRateLimited: a plane refused a request for load (code
	// rate_limited), matched by its [APIError], whose RetryAfter says
	// when to ask again. Reads are asked again once on their own.
	ErrRateLimited = errors.New("seat: rate limited")
)

// Errors of rooms.
var (
	// ErrNoRoom: this home is not in the room (it never created or joined
	// it, or left it). A [Room] handle's calls return it inside a [RoomError]
	// naming the room.
	ErrNoRoom = errors.New("seat: no such room in this home")

	// ErrRoomExists: creating or joining a room this home is in already.
	ErrRoomExists = errors.New("seat: this home already has that room")

	// ErrRoomLive: the room's channel still has other member accounts,
	// so the group this seat made there lives on with them; a new group
	// on the same channel would split the room in two.
	ErrRoomLive = errors.New("seat: the room's channel still has other members")

	// ErrNotOwner: the call is the room owner's alone (inviting, admitting).
	ErrNotOwner = errors.New("seat: only the room's owner can do that")

	// ErrNotMember: the relay or the directory refused because this
	// account is not a member of the channel (code not_a_member): the
	// owner has not admitted it yet, or removed it.
	ErrNotMember = errors.New("seat: this account is not a member of the channel")

	// ErrWelcomeWait: a join's wait ended before the owner admitted this seat;
	// joining again with the same room resumes waiting on the same request.
	ErrWelcomeWait = errors.New("seat: the owner has not admitted this seat yet")

	// ErrRemovedRoom: this seat was removed from the room; whatever let it in
	// stops working, and it reads nothing sent after the removal.
	ErrRemovedRoom = errors.New("seat: this seat was removed from the room")

	// ErrNoRooms: a watch of every room in a home that has none.
	ErrNoRooms = errors.New("seat: this home has no rooms")

	// ErrSuite: a suite rooms do not use.
	ErrSuite = errors.New("seat: rooms use the classic or the post-quantum suite only")

	// ErrFenceAhead: the relay expects the room's next commit at an epoch
	// this seat never reached, because it accepted a commit that this seat
	// (like every honest member) refused. Only the room's owner can reset the
	// fence; its seat does so on its next room command or in its watch.
	ErrFenceAhead = errors.New("seat: the relay holds a commit this seat refused; the room's owner resets it on its next room command")

	// ErrTreeMismatch: the ratchet tree the directory handed out for a
	// Welcome or a GroupInfo does not open the room (it does not hash to
	// the tree_hash the room's GroupContext names, RFC 9420 §7.8): it was
	// changed on the way, or put wrong. Nothing changed: the KeyPackage
	// is kept and the Welcome stays, so the join can be tried again.
	ErrTreeMismatch = errors.New("seat: the ratchet tree from the directory does not match the room")

	// ErrTreeUnavailable: the room's ratchet tree is not at the
	// directory (not put yet, or replaced by newer ones), or is over the
	// 64 MiB a seat reads. Nothing changed; the join can be tried again.
	ErrTreeUnavailable = errors.New("seat: the room's ratchet tree cannot be had from the directory")
)

// Errors of room roles.
var (
	// ErrNotAdmin: only the room's owner and admins may add or remove
	// others.
	ErrNotAdmin = errors.New("seat: only the room's owner and admins can do that")

	// ErrRemoveOwner: nobody removes the room's owner.
	ErrRemoveOwner = errors.New("seat: nobody can remove the room's owner")

	// ErrNoRoles: the room was created before rooms had roles.
	ErrNoRoles = errors.New("seat: this room was created before rooms had roles")
)

// Errors of invites, checked by the room's members.
var (
	// ErrInviteNotAdmitted: the room's members did not admit the join by
	// this invite (it is not, or no longer, listed in the room).
	ErrInviteNotAdmitted = errors.New("seat: the room does not admit joins by this invite")

	// ErrInviteExpired: the invite's lifetime in the room is over.
	ErrInviteExpired = errors.New("seat: the invite has expired")

	// ErrInviteUsed: the person has used this invite before; the room
	// admits nobody twice by one invite.
	ErrInviteUsed = errors.New("seat: this person has used the invite already")
)

// Errors of consent: adding people and their join offers.
var (
	// ErrSeatExists: the seat identity is registered already (by another
	// device of this person, or another home restored from its phrase).
	ErrSeatExists = errors.New("seat: the seat identity is already registered")

	// ErrNotAllowed: this account shares no room or org with the person
	// and gave no add-token of theirs, so it may not add them.
	ErrNotAllowed = errors.New("seat: that person has not agreed to be added by this account (no shared room or org, no add-token of theirs)")

	// ErrInvalidAddToken: the add-token is invalid, expired, used up or
	// revoked.
	ErrInvalidAddToken = errors.New("seat: the add-token is invalid, expired, used up or revoked")

	// ErrNoStock: the person has no join offers at the directory (no device
	// of theirs has signed in since stocks began, or all are used up).
	ErrNoStock = errors.New("seat: that account has no join offers at the directory")

	// ErrNotThePerson: a join offer the directory handed out for a person is
	// not theirs: its KeyPackage's credential fails the seat's check
	// (validateCredential), names another device than the claim says, or
	// another person than the one asked for (or, asked by account, not one
	// and the same person for all of them). The add adds nobody: a directory
	// that answers with someone else's offer cannot get them into the room.
	ErrNotThePerson = errors.New("seat: a join offer from the directory is not the person asked for")

	// ErrNotPending: no Welcome to that room waits in the inbox.
	ErrNotPending = errors.New("seat: nobody's Welcome to that room waits in the inbox")
)

// Errors of devices: grants, linked devices and revocation.
var (
	// ErrGrantExpired means the device grant expired before it was approved
	// and collected.
	ErrGrantExpired = errors.New("seat: the device grant expired")

	// ErrFingerprintMismatch: a device approval named a fingerprint that
	// is not the requesting device's, or none.
	ErrFingerprintMismatch = errors.New("seat: the fingerprint is not the one of the device asking to be approved")

	// ErrNoDevice: no device of this person has that ID in this home's rooms.
	ErrNoDevice = errors.New("seat: no device of this person with that id in this home's rooms")

	// ErrRevokedDevice: a Commit adds, or is made by, a device whose key its
	// person revoked.
	ErrRevokedDevice = errors.New("seat: that device was revoked by its person")

	// ErrNotIdentityHolder: approving and revoking devices takes the
	// person's identity key, which a linked device never holds.
	ErrNotIdentityHolder = errors.New("seat: this device does not hold the identity: approve and revoke devices on one that does, or recover with the phrase (signin --recover)")

	// ErrRevoked: the person revoked this device. Its credentials no
	// longer work and it reads nothing sent after the revocation.
	ErrRevoked = errors.New("seat: revoked: this device was revoked by its person; it can no longer use the account, and reads nothing sent after the revocation")

	// ErrLinkedHome: the home is a linked device's, which holds no
	// phrase; a phrase goes in a home of its own.
	ErrLinkedHome = errors.New("seat: this home is a linked device's (it holds no phrase)")

	// ErrBadLinkBox: what came with the approval is not from the
	// identity the certificate names, or not for this device's keys.
	ErrBadLinkBox = errors.New("seat: the approval's box is not signed by an identity for this device's keys")
)

// RoomError names the room an error is about: a [Room] handle's calls,
// and a watch of several rooms, return their errors in one. It unwraps
// to the cause, so errors.Is(err, ErrNoRoom) and the like keep working.
type RoomError struct {
	Room string // the room's name as the caller gave it, or its channel
	Err  error
}

func (e *RoomError) Error() string { return e.Err.Error() + ": " + e.Room }
func (e *RoomError) Unwrap() error { return e.Err }
