// Package stack wires a directory and a relay that run in one process:
// one JWT secret and one internal secret for both, revocations and
// channel members from the directory to the relay, and the relay's commit
// fence to the directory, all as direct calls. skytale.NewStack and
// skytaletest.NewStack are its two users; it imports only the two planes,
// so neither of them links a backend or a metrics library through it.
package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/relay"
)

// MinJWTSecret is the shortest JWT secret Start accepts: 32 bytes, the
// size of the HS256 key.
const MinJWTSecret = 32

// Config is what Start wires: the secrets once, and each plane's own
// configuration with its secrets and its links to the other left empty.
type Config struct {
	JWTSecret      []byte
	InternalSecret []byte
	Directory      directory.Config
	Relay          relay.Config
}

// Start starts the directory, then the relay that follows it. ctx bounds
// the start (what each plane opens and dials); the planes run until they
// are closed. If the relay does not start, the directory is closed again.
func Start(ctx context.Context, cfg Config) (*directory.Server, *relay.Server, error) {
	if err := check(cfg); err != nil {
		return nil, nil, err
	}
	fence := &lateFence{}
	dc := cfg.Directory
	dc.JWTSecret, dc.InternalSecret, dc.Fence = cfg.JWTSecret, cfg.InternalSecret, fence
	d, err := directory.New(ctx, dc)
	if err != nil {
		return nil, nil, err
	}
	rc := cfg.Relay
	rc.JWTSecret, rc.InternalSecret, rc.Revocations, rc.Members = cfg.JWTSecret, cfg.InternalSecret, d, d
	r, err := relay.New(ctx, rc)
	if err != nil {
		d.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	fence.r.Store(r)
	return d, r, nil
}

// check refuses a secret given twice with two values, a JWT secret too
// short, and a link between the planes set by the caller: Start makes
// those itself.
func check(cfg Config) error {
	switch {
	case len(cfg.JWTSecret) == 0:
		return errors.New("skytale: stack needs a JWT secret (StackConfig.JWTSecret, at least 32 random bytes)")
	case len(cfg.JWTSecret) < MinJWTSecret:
		return fmt.Errorf("skytale: the JWT secret is %d bytes; it must be at least %d random bytes", len(cfg.JWTSecret), MinJWTSecret)
	case len(cfg.Directory.JWTSecret) != 0 && !bytes.Equal(cfg.Directory.JWTSecret, cfg.JWTSecret),
		len(cfg.Relay.JWTSecret) != 0 && !bytes.Equal(cfg.Relay.JWTSecret, cfg.JWTSecret):
		return errors.New("skytale: set the JWT secret once, in StackConfig.JWTSecret; a sub-config has another")
	case len(cfg.Directory.InternalSecret) != 0 && !bytes.Equal(cfg.Directory.InternalSecret, cfg.InternalSecret):
		return errors.New("skytale: set the internal secret once, in StackConfig.InternalSecret; StackConfig.Directory has another")
	case len(cfg.Relay.InternalSecret) != 0 && !bytes.Equal(cfg.Relay.InternalSecret, cfg.InternalSecret):
		return errors.New("skytale: set the internal secret once, in StackConfig.InternalSecret; StackConfig.Relay has another")
	case cfg.Relay.Revocations != nil || cfg.Relay.Members != nil:
		return errors.New("skytale: a stack's relay learns revocations and members from its directory; leave StackConfig.Relay.Revocations and Members nil")
	case cfg.Directory.Fence != nil:
		return errors.New("skytale: a stack's directory reads the commit fence from its relay; leave StackConfig.Directory.Fence nil")
	}
	return nil
}

// lateFence is the directory's view of its stack's relay's commit fence.
// The directory starts first (the relay follows its feeds), so the relay
// is filled in once it runs; until then the fence cannot be read.
type lateFence struct{ r atomic.Pointer[relay.Server] }

func (f *lateFence) NextEpoch(ctx context.Context, channel string) (uint64, bool, error) {
	r := f.r.Load()
	if r == nil {
		return 0, false, errors.New("skytale: the stack's relay is not running yet")
	}
	return r.NextEpoch(ctx, channel)
}

var (
	_ relay.RevocationSource = (*directory.Server)(nil)
	_ relay.MembershipSource = (*directory.Server)(nil)
	_ directory.FenceSource  = (*relay.Server)(nil)
	_ directory.FenceSource  = (*lateFence)(nil)
)
