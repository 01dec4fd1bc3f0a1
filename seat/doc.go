// Package seat is the client side of skytale: the keys a person holds, the
// home folder that keeps them, the personal log synced through the relay as
// sealed batches, and rooms that are MLS groups with roles, invites and
// every device of their members.
//
// The servers are trusted with nothing they could read. Every long-term
// key derives from one 24-word recovery phrase ([NewPhrase],
// [ParsePhrase]) by HKDF under a label of its own; the home's database
// seals what the servers must not see under a key from the phrase, so a
// copy of it without the phrase file opens none of it ([ErrNoSeed]); the
// log crosses the relay only as padded AES-256-GCM batches ([SyncKey.Seal])
// that cover traffic imitates; and a room's membership, roles and invites
// are enforced by every member's MLS engine, not by the directory, so they
// hold even against a member whose software ignores them.
//
// A [Seat] is opened on a home with [Open]. It talks to the directory and
// the relay over the network with its own clients ([DirectoryClient],
// [RelayClient]) and imports neither plane. Its commands are written so
// that a crash or a lost answer does no harm and no member can stop the
// others: a room's state is stored before what it sends leaves, so a crash
// never reuses a message key or loses its own Commit; a publish retried
// after a lost answer is stored once; pending proposals are committed by
// whoever sends next; a relay fence left ahead by a Commit every member
// refused is reset by the owner's seat; and a member away longer than the
// relay's log reaches back rejoins by an external Commit.
//
// A room is reached through its handle, [Seat.Room]: s.Room("team") names
// the room <org>/rooms/team, s.Room(channel) any room by its channel. The
// handle creates or joins the room ([Room.Create], [Room.Join]) and does
// everything in it ([Room.Send], [Room.Sync], [Room.Members], [Room.Watch]
// ...); each call takes a context, and one about a room the seat is not
// in returns a [RoomError] naming it.
//
// docs/ARCHITECTURE.md follows a message, a commit and a join through this
// package and states the rules its rooms keep ("The seat's keys and the
// rules its rooms keep"); docs/SECURITY.md says which device holds which
// key and what revoking one cuts off; docs/API.md is the wire surface the
// clients speak; README.md's "What a copy of the home opens" lists what
// the home seals and what stays in the clear.
package seat
