package seat

import (
	"context"
	"errors"
	"fmt"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/mls"
)

// newRoomChannel returns the channel of a room this home does not have
// yet, and the account key to register or join it with.
func (s *Seat) newRoomChannel(ctx context.Context, name string) (ch, key string, err error) {
	if ch, err = s.roomChannel(ctx, name); err != nil {
		return "", "", err
	}
	if _, err := s.loadRoom(ctx, ch); err == nil {
		return "", "", ErrRoomExists
	}
	key, err = s.apiKey(ctx)
	return ch, key, err
}

// createRoom is [Room.Create] on the room called name.
func (s *Seat) createRoom(ctx context.Context, name string, o RoomOptions) (string, error) {
	suite := o.Suite
	if suite == 0 {
		suite = Suite
	}
	if err := checkRoomSuite(suite); err != nil {
		return "", err
	}
	s.lockRooms()
	defer s.unlockRooms()
	ch, key, err := s.newRoomChannel(ctx, name)
	if err != nil {
		return "", err
	}
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return "", err
	}
	dir := s.directory(key)
	if err := dir.RegisterChannel(ctx, ch); err != nil {
		return "", err
	}
	if err := s.checkChannelUnused(ctx, dir, ch); err != nil {
		return "", err
	}
	kp, err := mls.NewKeyPackage(suite, id, sig, s.mlsConfig())
	if err != nil {
		return "", err
	}
	gid := channel.GroupID(ch)
	// The creator is the room's owner, with no admins yet (roles.go).
	roles, err := rolesExtension(nil, &RoomRoles{Owner: PersonOf(id)})
	if err != nil {
		return "", err
	}
	cfg, ref := s.roomConfig()
	g, err := mls.NewGroupWithExtensions(gid[:], kp, roles, cfg)
	if err != nil {
		return "", err
	}
	ref.g = g
	// A room created over an existing channel starts after its history.
	r := &room{channel: ch, role: "owner", g: g}
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return "", err
	}
	if r.lastSeq, err = rc.SyncAll(ctx, ch, 0, func(RelayEntry) error { return nil }); err != nil {
		return "", err
	}
	return ch, s.saveRoom(ctx, r, true)
}

// checkChannelUnused refuses to create a group on a channel of this
// account that other accounts are still members of: they are in the group
// this seat made there before (its owner left it with `room leave`, or
// lost its home), and a second group on the channel would split the room
// silently.
func (s *Seat) checkChannelUnused(ctx context.Context, dir *DirectoryClient, ch string) error {
	account, err := s.st.meta(ctx, "account_id")
	if errors.Is(err, errNoValue) {
		return nil // a home from before accounts were kept
	}
	if err != nil {
		return err
	}
	m, err := dir.Members(ctx, ch)
	if err != nil {
		return err
	}
	for _, x := range m.Members {
		if x.AccountID != account {
			return fmt.Errorf("%w (%s)", ErrRoomLive, ch)
		}
	}
	return nil
}

// roomPublisher opens a publisher on the room channel ch.
func (s *Seat) roomPublisher(ctx context.Context, ch string) (*Publisher, error) {
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return nil, err
	}
	return rc.DialPublisher(ctx, ch)
}

func (s *Seat) roomRelay(ctx context.Context) (*RelayClient, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	return s.relay(key), nil
}
