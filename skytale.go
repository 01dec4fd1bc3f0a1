// Package skytale is the front door of an end-to-end encrypted channel
// system whose servers never see plaintext or keys.
//
// Two planes carry opaque bytes:
//
//   - the directory ([NewDirectory]): accounts and API keys, short-lived
//     JWTs, channel registration, invites, the MLS key-package directory and
//     Welcome handoff, device grants, seats and revocation;
//   - the relay ([NewRelay]): WebSocket fan-out and a bounded per-channel
//     ciphertext archive with catch-up endpoints.
//
// A seat ([NewSeat]) is the client: a BIP-39 seed from which its keys
// derive, a personal log synced as sealed, padded batches, and rooms that
// are MLS groups.
//
// Both planes are [net/http.Handler]s that mount under any mux; neither
// listens on its own. [NewStack] wires the two together in one process:
// revocations and channel members flow from the directory to the relay,
// and the directory reads the relay's commit fence, directly.
//
// # Storage
//
// By default each plane keeps its state in a pure-Go SQLite database: a
// file when the config names a path (DBPath), or a private in-memory
// database otherwise; a file-backed relay archive also keeps its payloads
// in an append-only log beside the file ([relay.LogDir]). For more than
// one process per plane, the directory keeps its state in PostgreSQL
// (DirectoryConfig.Database, a postgres:// URL, with DirectoryConfig.Backend
// set to pgstore.Backend{} from package directory/pgstore) and any number
// of directory processes share it, and the relays of a cluster share one
// NATS JetStream stream as their archive (RelayConfig.Archive set to
// jsarchive.New from package relay/jsarchive), each keeping only what it
// learned of members and revocations in its own SQLite. docs/POSTGRES.md
// and docs/CLUSTER.md describe running them; docs/ARCHITECTURE.md is the
// overview of the whole system.
//
// # What it links
//
// This package imports the planes and the seat, none of their optional
// backends: neither directory/pgstore nor directory/dirmetrics nor
// relay/jsarchive nor relay/relaymetrics, which an embedder that wants
// them imports itself; so it links no PostgreSQL, NATS or Prometheus
// client. A program that wants only a
// seat imports package seat; its tests can start a whole stack with
// package skytaletest, which is built from the planes alone.
//
// # What the planes see
//
// Ciphertext, channel names, sizes (quantized by the clients' padding),
// timing, account metadata and the shape of membership. Never content,
// seeds, sync keys or MLS group keys.
package skytale

import (
	"context"
	"errors"
	"net/http"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/internal/stack"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
)

// RelayConfig configures a relay. It is [relay.Config] itself, so every
// field the relay package has is set here, and go doc relay.Config
// documents each one. The fields most embedders set:
//
//   - DBPath: the SQLite file of the archive; "" keeps it in memory.
//   - JWTSecret: the HS256 key of the tokens the relay accepts (shared with
//     whatever mints them, the directory in a [Stack]). Required; use at
//     least 32 random bytes.
//   - Members: who may use which channel ([relay.NewMemberSet], or a
//     directory's feed with [relay.NewHTTPMembers]). Required unless
//     OpenChannels, where the application gates channels itself.
//   - Revocations: where revoked accounts are learned
//     ([relay.NewHTTPRevocations] for a directory elsewhere).
//   - Logger: one line per request; nil discards.
//
// A zero field means its documented default (archive cap 10,000
// application entries per channel, 7 days). A [Stack] sets JWTSecret, Revocations and Members itself.
type RelayConfig = relay.Config

// Relay is the message plane: an http.Handler plus Close.
type Relay = relay.Server

// DirectoryConfig configures a directory. It is [directory.Config]
// itself, so every field the directory package has is set here, and go doc
// directory.Config documents each one. The fields most embedders set:
//
//   - DBPath: the SQLite file; "" keeps the directory in memory.
//   - JWTSecret: the HS256 key of the tokens it mints, shared with the
//     relay. Required; use at least 32 random bytes.
//   - InternalSecret: authenticates the operator (account creation in any
//     signup mode, signup tokens, idle accounts, revoking any account, the
//     relay's feeds); empty turns those calls off.
//   - Signup: who may create accounts, open, invite or closed
//     (OpenSignup, the older field, still works when Signup is empty).
//   - Logger: one line per request, never a credential; nil discards.
//
// A zero field means its documented default. A [Stack] sets JWTSecret and
// InternalSecret itself, from [StackConfig].
type DirectoryConfig = directory.Config

// Directory is the directory plane: an http.Handler plus Close.
type Directory = directory.Server

// MinJWTSecret is the shortest JWT secret [NewStack] accepts: 32 bytes,
// the size of the HS256 key.
const MinJWTSecret = stack.MinJWTSecret

// NewRelay returns a relay ready to serve; ctx bounds its start (on
// JetStream, the dial to a NATS that may not answer), not its life. Close
// it to flush the archive and stop its goroutines.
func NewRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) { return relay.New(ctx, cfg) }

// NewDirectory returns a directory ready to serve; ctx bounds its start
// (on PostgreSQL, the dial to a server that may not answer), not its
// life. Close it to stop its sweeps.
func NewDirectory(ctx context.Context, cfg DirectoryConfig) (*Directory, error) {
	return directory.New(ctx, cfg)
}

// SeatConfig configures a seat; see [seat.Config].
type SeatConfig = seat.Config

// Seat is a client bound to one home folder.
type Seat = seat.Seat

// NewSeat opens (creating if needed) the seat in cfg.Home; ctx bounds the
// opening (the store's migrations), not the seat's life. Close it with
// [seat.Seat.Close].
func NewSeat(ctx context.Context, cfg SeatConfig) (*Seat, error) { return seat.Open(ctx, cfg) }

// Room is a handle on one room of a seat; see [seat.Room].
type Room = seat.Room

// InviteOptions, JoinOptions and AddOptions are the choices of a room
// handle's calls; see [seat.InviteOptions].
type (
	InviteOptions = seat.InviteOptions
	JoinOptions   = seat.JoinOptions
	AddOptions    = seat.AddOptions
)

// StackConfig configures a directory and a relay that run in one process.
//
// The secrets are set here, once: JWTSecret (at least [MinJWTSecret]
// bytes, shared by both planes) and InternalSecret. Leave the sub-configs'
// JWTSecret and InternalSecret empty; NewStack refuses a different value
// there rather than pick one. The relay learns revocations and channel
// membership (members added and removed, owners' fence resets) from the
// directory in-process, and the directory reads the relay's commit fence
// in-process (it keeps a GroupInfo only for the epoch the fence reached),
// so Relay.Revocations, Relay.Members and Directory.Fence must be left
// nil too.
type StackConfig struct {
	JWTSecret      []byte
	InternalSecret []byte
	Directory      DirectoryConfig
	Relay          RelayConfig
}

// Stack is a directory and a relay wired together.
type Stack struct {
	Directory *Directory
	Relay     *Relay
}

// NewStack starts both planes; ctx bounds their start, not their life.
// Mount Stack.Directory and Stack.Relay on whatever listeners you like.
func NewStack(ctx context.Context, cfg StackConfig) (*Stack, error) {
	d, r, err := stack.Start(ctx, stack.Config{
		JWTSecret: cfg.JWTSecret, InternalSecret: cfg.InternalSecret,
		Directory: cfg.Directory, Relay: cfg.Relay,
	})
	if err != nil {
		return nil, err
	}
	return &Stack{Directory: d, Relay: r}, nil
}

// Close closes the relay, then the directory, and waits for both.
func (s *Stack) Close(ctx context.Context) error {
	return errors.Join(s.Relay.Close(ctx), s.Directory.Close(ctx))
}

var (
	_ http.Handler = (*Relay)(nil)
	_ http.Handler = (*Directory)(nil)
)
