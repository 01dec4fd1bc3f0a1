// Package seat is the client side of skytale: the keys a person holds, and
// the sealed batches in which their log travels through the relay.
//
// # Keys
//
// Everything long-term derives from one 24-word BIP-39 recovery phrase
// ([NewPhrase], [ParsePhrase]). The phrase gives a 64-byte BIP-39 seed
// ([Phrase.Seed]), and each key is HKDF-SHA256 of that seed under its own
// label, so that no two purposes ever share key material:
//
//   - [Seed.SyncKey]: the AES-256-GCM key of the seat's own sync channel.
//   - [Seed.Identity]: the Ed25519 signing key whose public half, written as
//     a did:key ([DIDKey]), names the seat in the directory and in MLS.
//   - The home's local key: AES-256-GCM over everything in the home's
//     database that the servers must not see, each value bound to the row
//     it belongs to (localseal.go): room group states, KeyPackage and
//     device private keys, the sender and text of every history row (so
//     the names people gave), the personal log, the API key and the sync
//     credential, and this person's name. The database alone opens none
//     of them ([ErrNoSeed]); the phrase file beside it does. It still
//     shows channel names, ids, relay seqs, kinds, counts, sizes and
//     times of its rows, and the other settings.
//
// Device keys are random per device and do not derive from the seed. The
// types that hold secrets ([Phrase], [Seed], [SyncKey], [Identity]) print as
// "REDACTED" under every fmt verb, so a stray log line cannot leak them;
// [Phrase.Words] is the one deliberate way to reveal the phrase.
//
// # Sealed batches
//
// Log entries cross the relay as sealed batches ([SyncKey.Seal],
// [SyncKey.Open]): a magic prefix, then AES-256-GCM with a random nonce over
// a padded encoding of the entries, with the channel name bound in as
// associated data. The relay stores only these opaque bytes; their sizes are
// the padding package's buckets. A cover batch ([SyncKey.SealCover]) has the
// same outer shape and opens to [Batch.Cover], so receivers drop it after
// decryption and the relay cannot tell it from a real batch.
//
// # Rooms
//
// A room is reached through its handle, [Seat.Room]: s.Room("team")
// names the room <org>/rooms/team, s.Room(channel) any room by its
// channel. The handle creates or joins the room ([Room.Create],
// [Room.Join]) and does everything in it ([Room.Send], [Room.Sync],
// [Room.Members], [Room.Watch] ...); each call takes a context, and one
// about a room the seat is not in returns a [RoomError] naming it.
//
// # Accounts, orgs and channel membership
//
// An org belongs to its first account ([Seat.SignIn] into a new org); other
// accounts join it with an org invite minted by one of its accounts
// ([Seat.OrgInvite], [Seat.SignInInvited]); signing in to an existing org
// without one fails with [ErrOrgTaken].
//
// The relay carries a channel's traffic only for the channel's member
// accounts, which the directory keeps: the owner from registration, and a
// joiner once the owner publishes its Welcome ([Room.Admit]). Removing
// a member from a room ([Room.Remove]) also ends its account's
// membership, unless other seats of that account are still in the room,
// and [Room.Leave] ends this account's own. The owner's seat learns
// which account an identity belongs to when it admits it; when an admin
// removes a member, the owner's seat ends that account's membership the
// next time it catches up with the room. A relay refusal
// for want of membership is [ErrNotMember] (errors.Is), from a publish, a
// subscribe, the catch-up reads, or a live subscription the relay ends.
//
// Every publish carries an id of its own, and one the relay could not
// store (internal, unavailable, busy), or whose answer a dropped socket
// lost, is sent again with that id (a [Publisher] reconnects for it): the
// relay stores an id once within its duplicate window and answers the
// retry with the first seq, so a retry never stores an entry twice.
//
// # Cipher suites
//
// A room is created in [SuitePQ] (X-Wing: ML-KEM-768 with X25519) unless
// [RoomOptions] asks for [SuiteClassic], and keeps its suite for life
// ([Room.Suite]). A joiner cannot know the suite of the room it asks
// to join, so it offers one KeyPackage of each (suites.go) and the
// admitting member adds the one of the room's suite.
//
// # Who a member is
//
// A room member's identity names a person by the did:key of the person's
// identity key, and the member's leaf is signed either by that key or by a
// device key the person signed ([DeviceIdentity]); every member's engine
// refuses any other leaf (memberid.go). A person's devices are leaves of
// their own that show as the person ([PersonOf], [RoomMember].Person), with
// the person's role, and their messages carry the person as sender.
//
// # Joining without the owner
//
// Whoever commits puts the room's GroupInfo at the directory. The owner
// can mint invites that admit on their own ([Room.Invite] with Auto): the
// holder joins by external Commit at once, with a ticket only the token's
// holder can make, which every member's engine checks against the room's
// invites extension ([InvitesExtensionType]). The invite's uses and
// lifetime live there too: the joining Commit records its use, and every
// member refuses a use beyond them, a second use by the same person, or a
// use by a person removed since the invite was made (the removing Commit
// bars it from every invite then listed); the token is made by the
// inviting seat, and the directory sees only a credential derived from it
// (invites.go). Nothing else from outside is admitted (autojoin.go). An
// admin adds a person who is offline, and who agreed to be added by them
// (a shared room or org, or an add-token the person made,
// [Seat.ContactToken]), from the join offers its devices keep at the
// directory ([Room.Add], [Seat.Restock]); the Welcomes wait in the
// person's inbox until its next command or watch joins and accepts them
// ([Seat.ProcessInbox]), which is when the person becomes a member of the
// channel; a Welcome can be declined before ([Room.Decline]).
//
// # Rejoining instead of dying
//
// A member away longer than the relay's bounded log reaches back finds a
// [NoticeGap] in its history on its next catch-up; if commits were in the
// gap, it rejoins by an external Commit that replaces its own leaf, from
// the GroupInfo the directory keeps, and a [NoticeRejoined] says so
// (rejoin.go). [Room.Rejoin] does the same on request.
//
// # Every device in every room
//
// A home restored from the phrase signs its room leaves with a device key
// of its own, vouched for by the person's key, so a person's second
// device is a second member of each room, shown as the same person. When
// a device is approved, it offers itself to each room of the approving
// device, and that device (or the room's owner or an admin) adds it on
// its next command there or in its watch; the new device joins with
// [Seat.JoinDeviceRooms], or by itself on its next command in the room.
// [Seat.Devices] lists the person's devices in this home's rooms and
// [Seat.RevokeDevice] removes one from all of them (devicerooms.go).
//
// # Names
//
// A person may give a name ([Seat.SetName], the "name" setting); each of
// its rooms learns it in a name message on the seat's next command there
// or in its watch, and newcomers learn it after the commit that brought
// them. Messages and members carry the names people gave
// ([RoomMessage].SenderName, [RoomMember].Name). A name is a claim, not
// an identity: show it with [ShortID] of the person's key (names.go).
//
// # Room roles
//
// A room's creator is its owner ([Room.Create]); the owner may name
// admins ([Room.AddAdmin], [Room.RemoveAdmin]). Only the owner
// and admins add and remove others, nobody removes the owner, and only
// the owner's Commits change the roles. The roles are a GroupContext
// extension of the room's MLS group ([RolesExtensionType]), and every
// member's engine refuses a Commit that breaks them, so they hold even
// against a member whose software ignores them; a newcomer learns them
// from its Welcome. [Room.Members] shows each member's role. Rooms
// created before roles existed have none and keep the old behaviour (any
// member may add and remove anyone); see roles.go.
//
// # Rooms that keep moving
//
// No member can stop the others (settle.go). Proposals pending in an
// epoch are committed by the next member to send, leaving out those the
// roles refuse. A member that leaves ([Room.Leave]) proposes its own
// removal; the first owner or admin to see the proposal commits it. A
// member removed from a room finds a [NoticeRemoved] entry in its history
// (and in a running watch), and its sends fail with [ErrRemovedRoom]. A
// commit the relay accepted but every member refused leaves the relay
// expecting an epoch nobody has: commits then fail with [ErrFenceAhead]
// until the owner's seat, on its next room command or in its watch,
// resets the relay's commit fence to the group's epoch through the
// directory.
//
// # Tokens on long-lived connections
//
// The relay closes a WebSocket when its token expires unless the client
// sends a fresh one first. A [Conn] does this by itself, two thirds of the
// way through each token's lifetime ([RelayClient].Refresh mints the
// fresh ones), so a watch or an open room stays on one connection for as
// long as it runs.
//
// # Busy servers
//
// A GET that either plane refuses with 429 rate_limited and a Retry-After
// of at most 5 s (the directory's read bounds and read buckets, the
// relay's catch-up reads) is sent again after that wait, at most three
// times: a crowd of other accounts' reads slows this seat down but does
// not fail it. Nothing else is retried, and a longer Retry-After reaches
// the caller at once as an [APIError].
package seat
