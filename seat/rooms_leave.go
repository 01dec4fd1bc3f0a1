package seat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// withNamedRoom runs f on the room called name; see withRoom.
func (s *Seat) withNamedRoom(ctx context.Context, name string, f func(*room) error) error {
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return err
	}
	return s.withRoom(ctx, ch, f)
}

// leaveRoom is [Room.Leave] on the room called name.
func (s *Seat) leaveRoom(ctx context.Context, name string) error {
	s.lockRooms()
	defer s.unlockRooms()
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return err
	}
	var role string
	err = s.st.db.QueryRowContext(ctx, `SELECT role FROM rooms WHERE channel = ?`, ch).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRoom
	}
	if err != nil {
		return err
	}
	if role != "owner" {
		r, err := s.loadRoom(ctx, ch)
		if err != nil {
			return err
		}
		// An account the relay no longer serves the room was removed
		// already, or is leaving again after a failure at the directory.
		if err := s.proposeLeave(ctx, r); err != nil && !errors.Is(err, ErrNotMember) {
			return fmt.Errorf("seat: proposing to leave %s: %w", ch, err)
		}
		if err := s.leaveChannel(ctx, ch); err != nil {
			return err
		}
	}
	res, err := s.st.db.ExecContext(ctx, `DELETE FROM rooms WHERE channel = ?`, ch)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoRoom
	}
	return nil
}

// leaveChannel removes this account from the channel's members. A
// channel or account the directory no longer knows has nothing to leave.
func (s *Seat) leaveChannel(ctx context.Context, ch string) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	account, err := s.st.meta(ctx, "account_id")
	if errors.Is(err, errNoValue) {
		return nil // a home from before accounts were kept: nothing to name
	}
	if err != nil {
		return err
	}
	err = s.directory(key).RemoveMember(ctx, ch, account)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seat: leaving %s at the directory: %w", ch, err)
	}
	return nil
}
