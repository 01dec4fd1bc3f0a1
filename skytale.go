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
// Both are [net/http.Handler]s that mount under any mux; neither listens on
// its own. [NewStack] wires the two together in one process, with
// revocations flowing from the directory to the relay directly.
//
// # Storage
//
// Each plane keeps its state in one pure-Go SQLite database: a file when
// the config names a path, or a private in-memory database otherwise.
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
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
)

// RelayConfig configures a relay; see [relay.Config]. The zero value of
// each field means its documented default.
type RelayConfig = relay.Config

// Relay is the message plane: an http.Handler plus Close.
type Relay = relay.Server

// DirectoryConfig configures a directory; see [directory.Config].
type DirectoryConfig = directory.Config

// Directory is the directory plane: an http.Handler plus Close.
type Directory = directory.Server

// NewRelay returns a relay ready to serve. Close it to flush the archive
// and stop its goroutines.
func NewRelay(cfg RelayConfig) (*Relay, error) { return relay.New(cfg) }

// NewDirectory returns a directory ready to serve.
func NewDirectory(cfg DirectoryConfig) (*Directory, error) { return directory.New(cfg) }

// SeatConfig configures a seat; see [seat.Config].
type SeatConfig = seat.Config

// Seat is a client bound to one home folder.
type Seat = seat.Seat

// NewSeat opens (creating if needed) the seat in cfg.Home.
func NewSeat(cfg SeatConfig) (*Seat, error) { return seat.Open(context.Background(), cfg) }

// StackConfig configures a directory and a relay that run in one process.
// JWTSecret is shared by both planes. The relay learns revocations and
// channel membership (members added and removed, owners' fence resets) from
// the directory in-process, so Relay.Revocations and Relay.Members are set
// by NewStack.
type StackConfig struct {
	JWTSecret      []byte
	InternalSecret []byte
	Directory      DirectoryConfig // its JWTSecret and InternalSecret are overwritten
	Relay          RelayConfig     // its JWTSecret, Revocations and Members are overwritten
}

// Stack is a directory and a relay wired together.
type Stack struct {
	Directory *Directory
	Relay     *Relay
}

// NewStack starts both planes. Mount Stack.Directory and Stack.Relay on
// whatever listeners you like.
func NewStack(cfg StackConfig) (*Stack, error) {
	if len(cfg.JWTSecret) == 0 {
		return nil, errors.New("skytale: stack needs a JWT secret")
	}
	dc := cfg.Directory
	dc.JWTSecret, dc.InternalSecret = cfg.JWTSecret, cfg.InternalSecret
	d, err := directory.New(dc)
	if err != nil {
		return nil, err
	}
	rc := cfg.Relay
	rc.JWTSecret, rc.Revocations, rc.Members = cfg.JWTSecret, d, d
	r, err := relay.New(rc)
	if err != nil {
		d.Close(context.Background())
		return nil, err
	}
	return &Stack{Directory: d, Relay: r}, nil
}

// Close closes the relay, then the directory, and waits for both.
func (s *Stack) Close(ctx context.Context) error {
	return errors.Join(s.Relay.Close(ctx), s.Directory.Close(ctx))
}

var (
	_ http.Handler           = (*Relay)(nil)
	_ http.Handler           = (*Directory)(nil)
	_ relay.RevocationSource = (*Directory)(nil)
	_ relay.MembershipSource = (*Directory)(nil)
)
