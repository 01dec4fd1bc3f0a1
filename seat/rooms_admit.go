package seat

import (
	"context"
	"errors"

	"github.com/skytale-oss/skytale/mls"
)

// Admitted is a join request the owner admitted. AccountID is the
// joiner's directory account when the owner could learn it (see
// [Room.Remove]).
type Admitted struct {
	RequestID string
	Identity  string
	AccountID string
}

// admitJoiners is [Room.Admit] on the room called name.
func (s *Seat) admitJoiners(ctx context.Context, name string) ([]Admitted, error) {
	s.lockRooms()
	defer s.unlockRooms()
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return nil, err
	}
	r, err := s.loadRoom(ctx, ch)
	if err != nil {
		return nil, err
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	dir := s.directory(key)
	pending, err := dir.Pending(ctx, ch)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && (ae.Code == "not_owner" || ae.Status == 404) {
			return nil, ErrNotOwner
		}
		return nil, err
	}
	if err := s.catchUp(ctx, r, nil); err != nil {
		return nil, err
	}
	var done []Admitted
	var known map[string]bool // member accounts before this admit
	for _, req := range pending {
		if req.AccountID == "" && known == nil {
			known = s.memberAccounts(ctx, dir, ch)
		}
		res, err := s.admitOffer(ctx, r, req.KeyPackage)
		if err != nil {
			if errors.Is(err, mls.ErrInvalidLeafNode) || errors.Is(err, mls.ErrInvalidProposal) || errors.Is(err, errBadOffer) {
				continue // a bad key package: leave it for the sweep
			}
			return done, err
		}
		if err := dir.PublishWelcome(ctx, req.ID, res.Welcome); err != nil {
			return done, err
		}
		// The directory made the joiner's account a member when the
		// Welcome arrived; remember which account the identity is.
		account := req.AccountID
		if account == "" && known != nil {
			now := s.memberAccounts(ctx, dir, ch)
			account = addedAccount(known, now)
			known = now
		}
		s.rememberAccount(ctx, ch, req.Identity, account)
		done = append(done, Admitted{RequestID: req.ID, Identity: req.Identity, AccountID: account})
	}
	if len(done) > 0 {
		// The newcomers learn this person's name (names.go).
		s.settle(ctx, r)
	}
	return done, nil
}

// admitOffer commits the addition of the joiner whose offer is offer,
// with its KeyPackage of the room's suite (the others fail validation
// without anything being sent).
func (s *Seat) admitOffer(ctx context.Context, r *room, offer []byte) (*mls.CommitResult, error) {
	kps, err := decodeOffer(offer)
	if err != nil {
		return nil, err
	}
	for _, kp := range kps {
		var res *mls.CommitResult
		res, err = s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return addMembers(r, kp) })
		if err == nil || !errors.Is(err, mls.ErrInvalidLeafNode) && !errors.Is(err, mls.ErrInvalidProposal) {
			return res, err
		}
	}
	return nil, err
}

// memberAccounts returns the channel's member accounts, or nil if the
// directory cannot list them.
func (s *Seat) memberAccounts(ctx context.Context, dir *DirectoryClient, ch string) map[string]bool {
	m, err := dir.Members(ctx, ch)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, x := range m.Members {
		out[x.AccountID] = true
	}
	return out
}

// addedAccount is the one account in now that is not in before, or "" if
// there is not exactly one (the joiner's account was a member already, for
// another of its seats, or the list could not be read).
func addedAccount(before, now map[string]bool) string {
	if now == nil {
		return ""
	}
	var added []string
	for a := range now {
		if !before[a] {
			added = append(added, a)
		}
	}
	if len(added) != 1 {
		return ""
	}
	return added[0]
}
