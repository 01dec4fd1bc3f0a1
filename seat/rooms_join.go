package seat

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// inviteTo is [Room.Invite] on the room called name.
func (s *Seat) inviteTo(ctx context.Context, name string, uses int, ttl time.Duration) (string, error) {
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return "", err
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return "", err
	}
	tok, _, err := s.directory(key).Invite(ctx, ch, uses, int(ttl/time.Second))
	return tok, err
}

// joinRoom is [Room.Join] on the room called name.
func (s *Seat) joinRoom(ctx context.Context, name, token string, wait time.Duration) (string, error) {
	ch, key, err := s.newRoomChannel(ctx, name)
	if err != nil {
		return "", err
	}
	dir := s.directory(key)
	reqID, bundles, err := s.pendingJoin(ctx, ch)
	if errors.Is(err, sql.ErrNoRows) {
		// A room invite token shows the directory a credential derived
		// from it, and keeps the invite key (invites.go).
		inviteKey, dirToken, err := inviteCredentials(token)
		if err != nil {
			return "", err
		}
		// The joiner does not know the room's suite: it offers a
		// KeyPackage of each, and the admitting member picks.
		offer, offered, did, err := s.joinOffer(ctx)
		if err != nil {
			return "", err
		}
		bundles = offered
		proof, err := s.joinProof(ctx, ch, did, dirToken)
		if err != nil {
			return "", err
		}
		ans, err := dir.JoinWith(ctx, ch, dirToken, did, offer, &proof)
		if err != nil {
			return "", err
		}
		if !ans.Auto && strings.HasPrefix(token, roomTokenPrefix) {
			return "", errors.New("seat: the directory took a room invite token for an invite that waits for the owner")
		}
		if ans.Auto {
			// An invite that admits on its own: join by external Commit
			// now (autojoin.go); the offers are not needed.
			var epoch uint64
			if ans.Epoch != nil {
				epoch = *ans.Epoch
			}
			s.lockRooms()
			defer s.unlockRooms()
			return ch, s.joinByInvite(ctx, dir, ch, inviteKey, epoch, ans.GroupInfo)
		}
		reqID = ans.RequestID
		l, err := s.sealer()
		if err != nil {
			return "", err
		}
		priv, err := encodeBundles(bundles)
		if err != nil {
			return "", err
		}
		sealed := l.seal(sealedKeyPackage, reqID, priv)
		clear(priv)
		if _, err := s.st.db.ExecContext(ctx, `INSERT INTO key_packages(request_id, channel, private, created_at) VALUES (?, ?, ?, ?)`,
			reqID, ch, sealed, s.cfg.Now().UnixMilli()); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}

	deadline := time.Now().Add(wait)
	var welcome []byte
	for delay := 100 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		if welcome, err = dir.PollWelcome(ctx, reqID); err != nil {
			return "", err
		}
		if welcome != nil {
			break
		}
		if time.Now().After(deadline) {
			return "", ErrWelcomeWait
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(delay):
		}
	}
	var g *mls.Group
	var lastSeq uint64
	for _, b := range bundles {
		// The Welcome is for the KeyPackage of the room's suite; the
		// others refuse it.
		if g, err = s.joinWelcome(ctx, ch, welcome, b); err == nil || treeTrouble(err) {
			break
		}
	}
	if errors.Is(err, errTreeGone) {
		var r *room
		if r, err = s.joinInPlace(ctx, ch); err == nil {
			g, lastSeq = r.g, r.lastSeq
		}
	}
	if err != nil {
		return "", err
	}
	// Roles this seat cannot read would refuse every later Commit and
	// roster of the room: refuse the room now instead of keeping it.
	if _, _, err := rolesIn(g.Extensions()); err != nil {
		return "", fmt.Errorf("seat: the Welcome to %s carries roles that cannot be read: %w", ch, err)
	}
	r := &room{channel: ch, role: "member", g: g, lastSeq: lastSeq}
	s.lockRooms()
	defer s.unlockRooms()
	if err := s.saveRoom(ctx, r, true); err != nil {
		return "", err
	}
	// The private keys of the KeyPackage are spent (RFC 9420 §16.8).
	s.st.db.ExecContext(ctx, `DELETE FROM key_packages WHERE request_id = ?`, reqID)
	dir.AckWelcome(ctx, reqID)
	return ch, nil
}

// joinProof proves, for a join of ch by invite with the directory token
// dirToken, that this seat holds the member key of identity, the one it
// names there and joins the room as.
func (s *Seat) joinProof(ctx context.Context, ch, identity, dirToken string) (JoinProof, error) {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return JoinProof{}, err
	}
	if id != identity {
		return JoinProof{}, fmt.Errorf("seat: a join names this seat's member identity, not %s", identity)
	}
	account, err := s.AccountID(ctx)
	if err != nil {
		return JoinProof{}, err
	}
	return SignJoin(ed25519.NewKeyFromSeed(sig), account, ch, identity, dirToken), nil
}

func (s *Seat) pendingJoin(ctx context.Context, ch string) (string, []*mls.KeyPackageBundle, error) {
	var id string
	var priv []byte
	err := s.st.db.QueryRowContext(ctx, `SELECT request_id, private FROM key_packages
		WHERE channel = ? AND request_id NOT LIKE 'device:%' AND request_id NOT LIKE 'stock%'`, ch).Scan(&id, &priv)
	if err != nil {
		return "", nil, err
	}
	l, err := s.sealer()
	if err != nil {
		return "", nil, err
	}
	if priv, err = l.open(sealedKeyPackage, id, priv); err != nil {
		return "", nil, err
	}
	bs, err := decodeBundles(priv)
	if err != nil {
		// A home from before join offers kept one bundle, bare.
		var b *mls.KeyPackageBundle
		if b, err = mls.ParseKeyPackageBundle(priv); err == nil {
			bs = []*mls.KeyPackageBundle{b}
		}
	}
	clear(priv)
	return id, bs, err
}
