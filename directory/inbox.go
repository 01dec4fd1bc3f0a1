package directory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"time"
)

// Inbox limits.
const (
	MaxInbox        = 200 // entries one account's inbox holds
	maxInboxListed  = 50  // entries per GET /v1/inbox
	inboxLockPrefix = "inbox:"
)

// inboxEntry is one Welcome waiting for its account.
type inboxEntry struct {
	id, channel, device, from string
	welcome                   []byte
	at                        time.Time
}

// deliver stores welcome in the inbox of the account whose key package
// the caller claimed (claimID, one of the caller's own claims) and makes
// that account a member of the claim's channel, once per claim. The
// caller must still be an owner or member of the channel. scope, when
// non-empty, restricts the claim's channel.
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
		if err := tx.b.lockKey(ctx, tx.tx, inboxLockPrefix+target); err != nil {
			return err
		}
		var held int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM inbox WHERE account_id = ?`, target).Scan(&held); err != nil {
			return err
		}
		if held >= MaxInbox {
			return errInboxFull
		}
		if _, err := tx.exec(ctx,
			`INSERT INTO inbox (id, account_id, channel_id, device, from_id, welcome, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, target, chID, device, caller, welcome, now.UnixNano()); err != nil {
			return err
		}
		// The added account belongs to the channel from the moment its
		// Welcome is stored, as a joiner does when the owner admits it.
		_, err = addMember(ctx, tx, chID, chName, target, now)
		return err
	})
}

// inbox returns up to limit entries of account's inbox, oldest first.
func (s *store) inbox(ctx context.Context, account string, limit int) ([]inboxEntry, error) {
	rows, err := s.query(ctx,
		`SELECT i.id, c.name, i.device, i.from_id, i.welcome, i.created_at FROM inbox i JOIN channels c ON c.id = i.channel_id
		 WHERE i.account_id = ? ORDER BY i.seq LIMIT ?`, account, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inboxEntry{}
	for rows.Next() {
		var e inboxEntry
		var at int64
		if err := rows.Scan(&e.id, &e.channel, &e.device, &e.from, &e.welcome, &at); err != nil {
			return nil, err
		}
		e.at = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// dropInboxEntry deletes an entry of account's own inbox.
func (s *store) dropInboxEntry(ctx context.Context, account, id string) error {
	if !storable(id) {
		return errNotFound
	}
	return s.write(ctx, func(tx txn) error {
		n, err := tx.execN(ctx, `DELETE FROM inbox WHERE id = ? AND account_id = ?`, id, account)
		if err == nil && n != 1 {
			err = errNotFound
		}
		return err
	})
}

// sweepInbox deletes the inbox entries and the claims older than
// retention, acknowledged or not.
func (s *store) sweepInbox(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	cutoff := now.Add(-retention).UnixNano()
	var total int64
	err := s.write(ctx, func(tx txn) error {
		total = 0
		for _, q := range []string{
			`DELETE FROM inbox WHERE created_at < ?`,
			`DELETE FROM key_package_claims WHERE created_at < ?`,
			`DELETE FROM add_tokens WHERE expires_at < ?`,
		} {
			n, err := tx.execN(ctx, q, cutoff)
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
	if err := s.store.deliver(r.Context(), id, req.ClaimID, p.account, p.channel, welcome, s.cfg.Now()); err != nil {
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

// GET /v1/inbox → 200 {entries: [...]}, oldest first.
//
// Account-wide credentials only: the inbox is the account's.
func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	entries, err := s.store.inbox(r.Context(), p.account, maxInboxListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]inboxAnswer, len(entries))
	for i, e := range entries {
		out[i] = inboxAnswer{ID: e.id, Channel: e.channel, Device: e.device, From: e.from,
			Welcome: base64.StdEncoding.EncodeToString(e.welcome), At: rfc3339(e.at)}
	}
	writeJSON(w, http.StatusOK, struct {
		Entries []inboxAnswer `json:"entries"`
	}{out})
}

// DELETE /v1/inbox/{id} → 204
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
