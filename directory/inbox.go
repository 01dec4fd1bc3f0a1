package directory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Inbox limits; the first four are the defaults of Config.InboxEntries,
// InboxBytes, InboxPerSender and InboxSenderBytes. A Welcome is at most
// MaxWelcome (256 KiB).
const (
	// MaxInbox is how many entries one account's inbox holds, and
	// MaxInboxBytes how many bytes of Welcomes: enough for a person added
	// to rooms by dozens of people between two syncs, small enough that
	// no inbox is a store of its own.
	MaxInbox      = 200
	MaxInboxBytes = 16 << 20
	// MaxInboxPerSender and MaxInboxSenderBytes bound one sender's share
	// of one inbox (10 Welcomes and 2 MiB, a few rooms' worth of a
	// person's devices), so that no sender, and no set of fewer than
	// eight, can fill a person's inbox and keep out the Welcome of
	// someone else.
	MaxInboxPerSender   = 10
	MaxInboxSenderBytes = 2 << 20
	// maxInboxListed and maxInboxPageBytes bound one GET /v1/inbox answer:
	// at most 50 entries and 4 MiB of Welcomes (at least one entry).
	maxInboxListed    = 50
	maxInboxPageBytes = 4 << 20
	inboxLockPrefix   = "inbox:"
)

// memberOrInvitedChannel is memberChannel that also lets in an account
// with a Welcome to the channel waiting in its inbox: to join from the
// Welcome it must read the channel's ratchet tree (tree.go) before it
// accepts, and so before it is a member. The tree is the group's public
// state, which the Welcome it holds makes it part of.
func memberOrInvitedChannel(ctx context.Context, q queryer, name, account string) (string, error) {
	chID, err := memberChannel(ctx, q, name, account)
	if !errors.Is(err, errNotAMember) {
		return chID, err
	}
	if chID, _, err = channelOwner(ctx, q, name); err != nil {
		return "", err
	}
	var one int
	err = q.queryRow(ctx, `SELECT 1 FROM inbox WHERE channel_id = ? AND account_id = ? LIMIT 1`, chID, account).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNotAMember
	}
	if err != nil {
		return "", err
	}
	return chID, nil
}

// inboxEntry is one Welcome waiting for its account.
type inboxEntry struct {
	seq                       int64
	id, channel, device, from string
	welcome                   []byte
	at                        time.Time
}

// deliver stores welcome in the inbox of the account whose key package
// the caller claimed (claimID, one of the caller's own claims, which
// claimStock allowed only under the consent rule), once per claim. The
// caller must still be an owner or member of the channel. scope, when
// non-empty, restricts the claim's channel. Delivery makes nobody a
// member: the person's seat does, by accepting the entry (acceptInbox).
// The caller's share of the inbox is bounded (MaxInboxPerSender,
// MaxInboxSenderBytes: errSenderQuota), and so is the inbox
// (MaxInbox, MaxInboxBytes: errInboxFull); the Welcome is charged to the
// caller's storage budgets (budget.go) until it is accepted, declined or
// swept.
//
// The claim is marked delivered by one conditional UPDATE, which a
// concurrent delivery of the same claim waits on and then re-checks, so a
// claim is delivered once however often it is replayed.
func (s *store) deliver(ctx context.Context, id, claimID, caller, scope string, welcome []byte, now time.Time) error {
	if !storable(claimID) {
		return errNotFound
	}
	return s.write(ctx, func(tx txn) error {
		var target, device, chID, chName string
		err := tx.queryRow(ctx,
			`SELECT k.account_id, k.device, k.channel_id, c.name FROM key_package_claims k JOIN channels c ON c.id = k.channel_id
			 WHERE k.id = ? AND k.claimed_by = ?`, claimID, caller).Scan(&target, &device, &chID, &chName)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		if scope != "" && scope != chName {
			return errNotFound
		}
		if _, err := memberChannel(ctx, tx, chName, caller); err != nil {
			return err
		}
		n, err := tx.execN(ctx, `UPDATE key_package_claims SET delivered = 1 WHERE id = ? AND delivered = 0`, claimID)
		if err != nil {
			return err
		}
		if n != 1 {
			return errAlreadyDelivered
		}
		if err := tx.b.LockKey(ctx, tx.tx, inboxLockPrefix+target); err != nil {
			return err
		}
		var held, mine int
		var heldBytes, mineBytes int64
		if err := tx.queryRow(ctx,
			`SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(SUM(CASE WHEN from_id = ? THEN 1 ELSE 0 END), 0),
			        COALESCE(SUM(CASE WHEN from_id = ? THEN size ELSE 0 END), 0)
			 FROM inbox WHERE account_id = ?`, caller, caller, target).Scan(&held, &heldBytes, &mine, &mineBytes); err != nil {
			return err
		}
		size := int64(len(welcome))
		c := s.consent
		if mine >= c.inboxPerSender || mineBytes+size > c.inboxSenderBytes {
			return errSenderQuota
		}
		if held >= c.inboxEntries || heldBytes+size > c.inboxBytes {
			return errInboxFull
		}
		if _, err := tx.exec(ctx,
			`INSERT INTO inbox (id, account_id, channel_id, device, from_id, welcome, size, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			id, target, chID, device, caller, welcome, size, now.UnixNano()); err != nil {
			return err
		}
		return tx.charge(ctx, caller, size)
	})
}

// acceptInbox accepts an entry of account's own inbox: account becomes a
// member of the entry's channel (a member_added event, so the relay lets
// it in), and the entry is dropped, once. It returns the channel.
func (s *store) acceptInbox(ctx context.Context, account, id string, now time.Time) (string, error) {
	if !storable(id) {
		return "", errNotFound
	}
	var chName string
	err := s.write(ctx, func(tx txn) error {
		var chID string
		err := tx.queryRow(ctx,
			`SELECT i.channel_id, c.name FROM inbox i JOIN channels c ON c.id = i.channel_id WHERE i.id = ? AND i.account_id = ?`,
			id, account).Scan(&chID, &chName)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		n, err := freeRows(ctx, tx, `DELETE FROM inbox WHERE id = ? AND account_id = ? RETURNING from_id, size`, id, account)
		if err != nil {
			return err
		}
		if n != 1 {
			return errNotFound
		}
		_, err = addMember(ctx, tx, chID, chName, account, now)
		return err
	})
	return chName, err
}

// inbox returns a page of account's inbox, oldest first, after the entry
// whose seq is after (0: from the start): up to limit entries and, past
// the first, no more than maxBytes of Welcomes. more says entries follow.
// The sizes are read first, so a page never reads more Welcomes than it
// answers.
func (s *store) inbox(ctx context.Context, account string, after int64, limit int, maxBytes int64) (out []inboxEntry, more bool, err error) {
	rows, err := s.query(ctx,
		`SELECT seq, size FROM inbox WHERE account_id = ? AND seq > ? ORDER BY seq LIMIT ?`, account, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	var last int64
	var n int
	var total int64
	for rows.Next() {
		var seq, size int64
		if err := rows.Scan(&seq, &size); err != nil {
			rows.Close()
			return nil, false, err
		}
		if n == limit || (n > 0 && total+size > maxBytes) {
			more = true
			break
		}
		n, total, last = n+1, total+size, seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	out = []inboxEntry{}
	if n == 0 {
		return out, false, nil
	}
	rows, err = s.query(ctx,
		`SELECT i.seq, i.id, c.name, i.device, i.from_id, i.welcome, i.created_at FROM inbox i JOIN channels c ON c.id = i.channel_id
		 WHERE i.account_id = ? AND i.seq > ? AND i.seq <= ? ORDER BY i.seq`, account, after, last)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var e inboxEntry
		var at int64
		if err := rows.Scan(&e.seq, &e.id, &e.channel, &e.device, &e.from, &e.welcome, &at); err != nil {
			return nil, false, err
		}
		e.at = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, more, rows.Err()
}

// dropInboxEntry deletes an entry of account's own inbox.
func (s *store) dropInboxEntry(ctx context.Context, account, id string) error {
	if !storable(id) {
		return errNotFound
	}
	return s.write(ctx, func(tx txn) error {
		n, err := freeRows(ctx, tx, `DELETE FROM inbox WHERE id = ? AND account_id = ? RETURNING from_id, size`, id, account)
		if err == nil && n != 1 {
			err = errNotFound
		}
		return err
	})
}

// sweepInbox deletes the inbox entries and the claims older than
// retention, acknowledged or not, and the claims whose job is done: the
// stock's owner acknowledged them, their claimer delivered the Welcome,
// and they are past the claim window the rate limits count (claimWindow).
// Until then a claim says who took whose join offer; after, nothing needs
// to know.
func (s *store) sweepInbox(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	cutoff := now.Add(-retention).UnixNano()
	var total int64
	err := s.write(ctx, func(tx txn) error {
		n, err := freeRows(ctx, tx, `DELETE FROM inbox WHERE created_at < ? RETURNING from_id, size`, cutoff)
		if err != nil {
			return err
		}
		total = n
		for _, q := range []struct {
			q   string
			arg int64
		}{
			{`DELETE FROM key_package_claims WHERE created_at < ?`, cutoff},
			{`DELETE FROM key_package_claims WHERE acked = 1 AND delivered = 1 AND created_at < ?`, now.Add(-claimWindow).UnixNano()},
			{`DELETE FROM add_tokens WHERE expires_at < ?`, cutoff},
		} {
			n, err := tx.execN(ctx, q.q, q.arg)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return total, err
}

type deliverRequest struct {
	ClaimID string `json:"claim_id"`
	Welcome string `json:"welcome"`
}

// POST /v1/inbox {claim_id, welcome} → 201 {id}
//
// Who may call: the account that made the claim (else 404), still an
// owner or member of its channel; the claim itself needed the person's
// consent (contacts.go). On whom it acts: the claimed person, whose inbox
// gets the Welcome; nobody becomes a member (POST /v1/inbox/{id}/accept).
// Storage: one sender holds at most MaxInboxPerSender entries and
// MaxInboxSenderBytes in one inbox (429 quota_exceeded), an inbox at most
// MaxInbox entries and MaxInboxBytes (409 inbox_full), kept for
// InboxRetention. A stranger has no claim to deliver against; a crowd of
// related senders fills no more than its shares.
func (s *Server) handleDeliver(w http.ResponseWriter, r *http.Request, p principal) {
	var req deliverRequest
	if !decode(w, r, welcomeBody, &req) {
		return
	}
	if req.ClaimID == "" {
		badRequest(w, "claim_id is required")
		return
	}
	welcome, ok := decodeB64(w, "welcome", req.Welcome, MaxWelcome)
	if !ok {
		return
	}
	id, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.store.deliver(r.Context(), id, req.ClaimID, p.account, p.channel, welcome, s.cfg.Now())
	if errors.Is(err, errSenderQuota) {
		writeError(w, http.StatusTooManyRequests, "quota_exceeded", fmt.Sprintf(
			"the caller's share of that person's inbox is used up (%d Welcomes and %s per sender) until the person reads or declines them",
			s.cfg.InboxPerSender, sizeText(s.cfg.InboxSenderBytes)))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
}

type inboxAnswer struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	Device  string `json:"device"`
	From    string `json:"from"`
	Welcome string `json:"welcome"`
	At      string `json:"at"`
}

// GET /v1/inbox?after=<cursor> → 200 {entries: [...], has_more, next}, oldest first.
//
// Account-wide credentials only: the inbox is the account's. A page holds
// at most maxInboxListed entries and maxInboxPageBytes of Welcomes; next
// is the cursor for the page after (pass it as after), present when
// has_more.
func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	after, ok := seqCursor(w, r, "after must be a cursor from an earlier page")
	if !ok {
		return
	}
	entries, more, err := s.store.inbox(r.Context(), p.account, after, maxInboxListed, maxInboxPageBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]inboxAnswer, len(entries))
	for i, e := range entries {
		out[i] = inboxAnswer{ID: e.id, Channel: e.channel, Device: e.device, From: e.from,
			Welcome: base64.StdEncoding.EncodeToString(e.welcome), At: rfc3339(e.at)}
	}
	ans := struct {
		Entries []inboxAnswer `json:"entries"`
		HasMore bool          `json:"has_more"`
		Next    string        `json:"next,omitempty"`
	}{Entries: out, HasMore: more}
	if more {
		ans.Next = strconv.FormatInt(entries[len(entries)-1].seq, 10)
	}
	writeJSON(w, http.StatusOK, ans)
}

// POST /v1/inbox/{id}/accept → 200 {channel}
//
// Who may call: the person whose inbox holds the entry, with an
// account-wide credential; anyone else, the sender included, gets 404, as
// for an entry that does not exist. On whom it acts: the caller only, who
// becomes a member of the entry's channel (their seat joined the room from
// the Welcome); the entry is dropped, once (then 404). It stores one
// membership row and answers the channel name. A crowd can accept nothing
// for someone else.
func (s *Server) handleAcceptInbox(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	ch, err := s.store.acceptInbox(r.Context(), p.account, r.PathValue("id"), s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"channel": ch})
}

// DELETE /v1/inbox/{id} → 204
//
// Drops (declines) an entry of the caller's own inbox; the sender is told
// nothing, as when the entry expires unread.
func (s *Server) handleDropInbox(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	if err := s.store.dropInboxEntry(r.Context(), p.account, r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
