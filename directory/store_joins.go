package directory

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// createInvite stores an invite of a channel account owns. An auto invite
// makes its holder a member at once when it joins (see join).
func (s *store) createInvite(ctx context.Context, channel, account string, hash []byte, maxUses int, auto bool, expires, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		chID, err := ownedChannel(ctx, tx, channel, account)
		if err != nil {
			return err
		}
		// A hash a seat chose may be one stored already.
		var one int
		if err := tx.queryRow(ctx, `SELECT 1 FROM invites WHERE hash = ?`, hash).Scan(&one); err == nil {
			return errInviteExists
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.exec(ctx,
			`INSERT INTO invites (hash, channel_id, max_uses, uses, expires_at, created_at, auto) VALUES (?, ?, ?, 0, ?, ?, ?)`,
			hash, chID, maxUses, expires.UnixNano(), now.UnixNano(), sqlBool(auto))
		return err
	})
}

// createOrgInvite stores an org invite minted by account, which must
// belong to org.
func (s *store) createOrgInvite(ctx context.Context, org, account string, hash []byte, maxUses int, expires, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		_, err := tx.exec(ctx,
			`INSERT INTO org_invites (hash, org, created_by, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, ?, 0, ?, ?)`,
			hash, org, account, maxUses, expires.UnixNano(), now.UnixNano())
		return err
	})
}

func (s *store) createFederationInvite(ctx context.Context, channel, account, org string, hash []byte, maxUses int, auto bool, expires, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		chID, err := ownedChannel(ctx, tx, channel, account)
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx,
			`INSERT INTO federation_invites (hash, channel_id, org, max_uses, uses, expires_at, created_at, auto) VALUES (?, ?, ?, ?, 0, ?, ?, ?)`,
			hash, chID, org, maxUses, expires.UnixNano(), now.UnixNano(), sqlBool(auto))
		return err
	})
}

// joinRequest is one row of the join queue.
type joinRequest struct {
	id         string
	identity   string
	account    string // the requesting account, which the owner adds as a member
	keyPackage []byte
	createdAt  time.Time
}

type joinParams struct {
	id         string
	channel    string
	caller     principal
	inviteHash []byte // nil when fedHash is set
	fedHash    []byte // federation token hash, or nil
	identity   string
	keyPackage []byte // nil only for an auto invite
	maxPending int
	now        time.Time
}

// joined is what a join did: queued a request for the owner, or (with an
// auto invite) made the caller a member at once, with the channel's
// GroupInfo if one was put.
type joined struct {
	auto      bool
	groupInfo *groupInfo // nil when none was put (or not auto)
}

// join consumes one use of the invite (or federation invite) and either
// queues the join request or, when the invite is an auto invite, makes the
// caller a member of the channel and records the request as completed,
// atomically: if any step fails nothing is consumed.
//
// The use is taken by one conditional UPDATE, which a concurrent join of
// the same invite waits on and then re-checks, so an invite is never used
// more than max_uses times. The channel row is locked first, so the joins
// of one channel count its pending requests one at a time.
func (s *store) join(ctx context.Context, p joinParams) (j joined, err error) {
	err = s.write(ctx, func(tx txn) error {
		j = joined{}
		var chID string
		err := tx.queryRow(ctx, `SELECT id FROM channels WHERE name = ?`+tx.b.LockRow(), p.channel).Scan(&chID)
		if errors.Is(err, sql.ErrNoRows) {
			return errChannelNotFound
		}
		if err != nil {
			return err
		}
		now := p.now.UnixNano()
		var auto int
		var invitedAt int64
		if p.fedHash != nil {
			err = tx.queryRow(ctx,
				`UPDATE federation_invites SET uses = uses + 1
				 WHERE hash = ? AND channel_id = ? AND org = ? AND uses < max_uses AND expires_at > ?
				 RETURNING auto, created_at`,
				p.fedHash, chID, p.caller.org, now).Scan(&auto, &invitedAt)
		} else {
			err = tx.queryRow(ctx,
				`UPDATE invites SET uses = uses + 1
				 WHERE hash = ? AND channel_id = ? AND uses < max_uses AND expires_at > ?
				 RETURNING auto, created_at`,
				p.inviteHash, chID, now).Scan(&auto, &invitedAt)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if p.fedHash != nil {
				return errFederationDenied
			}
			return errInviteInvalid
		}
		if err != nil {
			return err
		}
		// An invite from before the caller's removal does not readmit it
		// (the transaction's end undoes the use).
		if err := checkNotRemoved(ctx, tx, chID, p.caller.account, invitedAt); err != nil {
			return err
		}
		if auto == 1 {
			return autoJoin(ctx, tx, chID, p, &j)
		}
		if p.keyPackage == nil {
			return errKeyPackageRequired
		}
		var pending int
		if err := tx.queryRow(ctx,
			`SELECT COUNT(*) FROM join_requests WHERE channel_id = ? AND status = 'pending'`,
			chID).Scan(&pending); err != nil {
			return err
		}
		if pending >= p.maxPending {
			return errTooManyPending
		}
		if _, err := tx.exec(ctx,
			`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at)
			 VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`,
			p.id, chID, p.caller.account, p.identity, p.keyPackage, now, now); err != nil {
			return err
		}
		return tx.charge(ctx, p.caller.account, int64(len(p.keyPackage)))
	})
	return j, err
}

// autoJoin finishes a join by an auto invite, in tx: the caller becomes a
// member (a member_added event for the relay), and the request is recorded
// as completed with no Welcome, so the owner never sees it pending (the
// joiner enters the group by an external commit, not by a Welcome) while
// the joiner's poll of it still answers. It does not count against the
// pending cap: nothing waits for the owner.
func autoJoin(ctx context.Context, tx txn, chID string, p joinParams, j *joined) error {
	now := p.now.UnixNano()
	kp := p.keyPackage
	if kp == nil {
		kp = []byte{}
	}
	if _, err := tx.exec(ctx,
		`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at)
		 VALUES (?, ?, ?, ?, ?, 'completed', ?, ?)`,
		p.id, chID, p.caller.account, p.identity, kp, now, now); err != nil {
		return err
	}
	if err := tx.charge(ctx, p.caller.account, int64(len(kp))); err != nil {
		return err
	}
	if _, err := addInviteMember(ctx, tx, chID, p.channel, p.caller.account, p.now); err != nil {
		return err
	}
	hash, fed := p.inviteHash, false
	if p.fedHash != nil {
		hash, fed = p.fedHash, true
	}
	if err := recordIdentity(ctx, tx, chID, p.identity, p.caller.account, hash, fed, p.now); err != nil {
		return err
	}
	gi, err := readGroupInfo(ctx, tx, chID)
	if err != nil && !errors.Is(err, errNotFound) {
		return err
	}
	j.auto, j.groupInfo = true, gi
	return nil
}

func (s *store) pending(ctx context.Context, channel, account string) ([]joinRequest, error) {
	chID, err := ownedChannel(ctx, s, channel, account)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx,
		`SELECT id, identity, account_id, key_package, created_at FROM join_requests
		 WHERE channel_id = ? AND status = 'pending' ORDER BY created_at, `+s.b.InsertionOrder(), chID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	reqs := []joinRequest{}
	for rows.Next() {
		var r joinRequest
		var created int64
		if err := rows.Scan(&r.id, &r.identity, &r.account, &r.keyPackage, &created); err != nil {
			return nil, err
		}
		r.createdAt = time.Unix(0, created).UTC()
		reqs = append(reqs, r)
	}
	return reqs, rows.Err()
}

// completeRequest stores the Welcome for a pending request of a channel the
// caller owns. scope, when non-empty, restricts the request's channel.
func (s *store) completeRequest(ctx context.Context, id, account, scope string, welcome []byte, now time.Time) error {
	if !storable(id) {
		return errNotFound
	}
	return s.write(ctx, func(tx txn) error {
		var chID, chName, joiner string
		err := tx.queryRow(ctx,
			`UPDATE join_requests SET status = 'completed', welcome = ?, updated_at = ?
			 WHERE id = ? AND status = 'pending' AND channel_id IN (
			   SELECT id FROM channels WHERE owner_id = ? AND (? = '' OR name = ?))
			 RETURNING channel_id, account_id`,
			welcome, now.UnixNano(), id, account, scope, scope).Scan(&chID, &joiner)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		if err := tx.queryRow(ctx, `SELECT name FROM channels WHERE id = ?`, chID).Scan(&chName); err != nil {
			return err
		}
		// The Welcome is the owner's to pay for (budget.go).
		if err := tx.charge(ctx, account, int64(len(welcome))); err != nil {
			return err
		}
		// The joiner belongs to the channel from the moment its Welcome
		// is published: it can then take part in the group.
		_, err = addMember(ctx, tx, chID, chName, joiner, now)
		return err
	})
}

// requestStatus returns the status and Welcome of the caller's own request.
func (s *store) requestStatus(ctx context.Context, id, account, scope string) (status string, welcome []byte, err error) {
	if !storable(id) {
		return "", nil, errNotFound
	}
	err = s.queryRow(ctx,
		`SELECT r.status, r.welcome FROM join_requests r JOIN channels c ON c.id = r.channel_id
		 WHERE r.id = ? AND r.account_id = ? AND (? = '' OR c.name = ?)`,
		id, account, scope, scope).Scan(&status, &welcome)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, errNotFound
	}
	return status, welcome, err
}

// ackRequest deletes the caller's own completed request and reports whether
// there was one.
func (s *store) ackRequest(ctx context.Context, id, account, scope string) (bool, error) {
	if !storable(id) {
		return false, nil
	}
	var acked bool
	err := s.write(ctx, func(tx txn) error {
		n, err := freeJoinRequests(ctx, tx,
			`id = ? AND account_id = ? AND status = 'completed'
			 AND (? = '' OR channel_id IN (SELECT id FROM channels WHERE name = ?))`,
			id, account, scope, scope)
		acked = n == 1
		return err
	})
	return acked, err
}
