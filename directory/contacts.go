package directory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Consent: nothing happens to a person without their say.
//
// An account may claim a person's join offers (stock.go) and leave a
// Welcome in their inbox (inbox.go) only under a relationship the person
// agreed to, the one predicate [mayAdd]:
//
//   - the two accounts share a channel (each is its owner or a member);
//   - they are accounts of one org (joining an org takes an org invite
//     from one of its accounts);
//   - the caller presents an add-token the person made
//     (POST /v1/contacts/tokens), which the claim uses once.
//
// Everyone else is refused 403 not_allowed, and a claim by identity
// answers a stranger the same whether or not the identity exists, so
// nobody learns whose stock holds what.
//
// The relationship admits claims; the hourly limits of claimLimits bound
// what even a crowd of related accounts can take from one person.

// Add-token limits.
const (
	// MaxAddTokens is how many live add-tokens one account may hold: each
	// is a small row, and a person hands out a few at a time.
	MaxAddTokens     = 100
	prefixAddToken   = "skt_add_"
	addTokensLockKey = "addtokens:"
)

// mayAdd reports whether caller may claim target's offers and deliver
// Welcomes to target: they share a channel or an org. An add-token is
// the third way in; see useAddToken.
func mayAdd(ctx context.Context, q queryer, caller, target string) (bool, error) {
	var ok bool
	err := q.queryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM accounts a JOIN accounts b ON a.org = b.org WHERE a.id = ? AND b.id = ?)
		     OR EXISTS (SELECT 1 FROM channel_members m JOIN channel_members n ON m.channel_id = n.channel_id
		                WHERE m.account_id = ? AND n.account_id = ?)`,
		caller, target, caller, target).Scan(&ok)
	return ok, err
}

// useAddToken uses one use of the add-token whose hash is hash, if it is
// target's, unexpired and not used up. Anything else is
// errAddTokenInvalid, and nothing changes.
func useAddToken(ctx context.Context, tx txn, hash []byte, target string, now time.Time) error {
	n, err := tx.execN(ctx,
		`UPDATE add_tokens SET uses = uses + 1 WHERE hash = ? AND account_id = ? AND uses < max_uses AND expires_at > ?`,
		hash, target, now.UnixNano())
	if err != nil {
		return err
	}
	if n != 1 {
		return errAddTokenInvalid
	}
	return nil
}

// addTokenOwner returns the account that made the add-token whose hash
// is hash, if it is still usable; else errAddTokenInvalid.
func addTokenOwner(ctx context.Context, q queryer, hash []byte, now time.Time) (string, error) {
	var account string
	err := q.queryRow(ctx,
		`SELECT account_id FROM add_tokens WHERE hash = ? AND uses < max_uses AND expires_at > ?`,
		hash, now.UnixNano()).Scan(&account)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errAddTokenInvalid
	}
	return account, err
}

// allowAdd checks, in tx, that caller may add target: by relationship,
// or else by the add-token whose hash is tokenHash (nil: none), which
// then uses one use. A caller with a relationship uses no token.
func allowAdd(ctx context.Context, tx txn, caller, target string, tokenHash []byte, now time.Time) error {
	ok, err := mayAdd(ctx, tx, caller, target)
	if err != nil || ok {
		return err
	}
	if tokenHash == nil {
		return errNotAllowed
	}
	if err := useAddToken(ctx, tx, tokenHash, target, now); err != nil {
		return errNotAllowed
	}
	return nil
}

// addToken is an add-token as its maker sees it: never the secret.
type addToken struct {
	id               string
	maxUses, uses    int
	expires, created time.Time
}

func (s *store) createAddToken(ctx context.Context, id, account string, hash []byte, maxUses int, expires, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		if err := tx.b.LockKey(ctx, tx.tx, addTokensLockKey+account); err != nil {
			return err
		}
		// Used-up and expired tokens make room for new ones.
		if _, err := tx.exec(ctx, `DELETE FROM add_tokens WHERE account_id = ? AND (uses >= max_uses OR expires_at <= ?)`,
			account, now.UnixNano()); err != nil {
			return err
		}
		var held int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM add_tokens WHERE account_id = ?`, account).Scan(&held); err != nil {
			return err
		}
		if held >= MaxAddTokens {
			return errTooManyAddTokens
		}
		_, err := tx.exec(ctx,
			`INSERT INTO add_tokens (id, hash, account_id, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, ?, 0, ?, ?)`,
			id, hash, account, maxUses, expires.UnixNano(), now.UnixNano())
		return err
	})
}

// maxAddTokensListed bounds one page of GET /v1/contacts/tokens: 50
// tokens of about 200 bytes each.
const maxAddTokensListed = 50

// addTokenCursor is where a page of add-tokens ends: the last token's
// creation time and id, the order they are listed in (newest first).
type addTokenCursor struct {
	at int64
	id string
}

func (c addTokenCursor) String() string { return fmt.Sprintf("%d.%s", c.at, c.id) }

func parseAddTokenCursor(s string) (addTokenCursor, bool) {
	a, id, ok := strings.Cut(s, ".")
	at, err := strconv.ParseInt(a, 10, 64)
	return addTokenCursor{at, id}, ok && err == nil && at >= 0 && id != "" && storable(id)
}

// addTokens lists up to limit of account's add-tokens, newest first,
// after the cursor (nil: from the newest), and the cursor of the page
// after when there are more.
func (s *store) addTokens(ctx context.Context, account string, after *addTokenCursor, limit int) ([]addToken, *addTokenCursor, error) {
	c := addTokenCursor{at: math.MaxInt64}
	if after != nil {
		c = *after
	}
	rows, err := s.query(ctx,
		`SELECT id, max_uses, uses, expires_at, created_at FROM add_tokens
		 WHERE account_id = ? AND (created_at < ? OR (created_at = ? AND id > ?))
		 ORDER BY created_at DESC, id LIMIT ?`, account, c.at, c.at, c.id, limit+1)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	out := []addToken{}
	for rows.Next() {
		if len(out) == limit {
			last := out[len(out)-1]
			return out, &addTokenCursor{last.created.UnixNano(), last.id}, nil
		}
		var t addToken
		var exp, at int64
		if err := rows.Scan(&t.id, &t.maxUses, &t.uses, &exp, &at); err != nil {
			return nil, nil, err
		}
		t.expires, t.created = time.Unix(0, exp).UTC(), time.Unix(0, at).UTC()
		out = append(out, t)
	}
	return out, nil, rows.Err()
}

// revokeAddToken deletes one of account's own add-tokens.
func (s *store) revokeAddToken(ctx context.Context, account, id string) error {
	if !storable(id) {
		return errNotFound
	}
	return s.write(ctx, func(tx txn) error {
		n, err := tx.execN(ctx, `DELETE FROM add_tokens WHERE id = ? AND account_id = ?`, id, account)
		if err == nil && n != 1 {
			err = errNotFound
		}
		return err
	})
}

type createAddTokenRequest struct {
	MaxUses    *int64 `json:"max_uses"`
	TTLSeconds *int64 `json:"ttl_seconds"`
}

type addTokenAnswer struct {
	ID        string `json:"id"`
	Token     string `json:"token,omitempty"`
	MaxUses   int    `json:"max_uses"`
	Uses      int    `json:"uses"`
	ExpiresAt string `json:"expires_at"`
	CreatedAt string `json:"created_at"`
}

// POST /v1/contacts/tokens {max_uses?, ttl_seconds?} → 201 {id, token: "skt_add_…", expires_at, max_uses}
//
// Who may call: any account, with an account-wide credential. On whom it
// acts: the caller only; the token lets its holder claim the caller's
// join offers and deliver Welcomes to the caller as if they shared a
// room, each claim that needs it using one use. Uses and lifetime follow
// the invites' ranges and defaults (1..100 uses, 60 s..7 days). Storage:
// at most MaxAddTokens rows per account (429 too_many_add_tokens beyond),
// the secret only as its SHA-256 hash. A stranger can do nothing with
// another's tokens: listing and revoking see only the caller's own.
func (s *Server) handleCreateAddToken(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	var req createAddTokenRequest
	if hasBody(r) && !decode(w, r, smallBody, &req) {
		return
	}
	uses, ttl, ok := inviteLimits(w, req.MaxUses, req.TTLSeconds)
	if !ok {
		return
	}
	id, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tok, hash, err := s.newSecret(prefixAddToken)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	exp := now.Add(ttl)
	if err := s.store.createAddToken(r.Context(), id, p.account, hash, uses, exp, now); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, addTokenAnswer{ID: id, Token: tok, MaxUses: uses, ExpiresAt: rfc3339(exp), CreatedAt: rfc3339(now)})
}

// GET /v1/contacts/tokens?after=<cursor> → 200 {tokens: [{id, max_uses, uses, expires_at, created_at}], has_more, next?}
//
// Who may call: an account, with an account-wide credential. On whom it
// acts: nobody; it lists the caller's own add-tokens, newest first, never
// their secrets, at most maxAddTokensListed a page (about 10 KiB); next,
// present with has_more, is the cursor of the page after. It stores
// nothing; a stranger sees only its own.
func (s *Server) handleListAddTokens(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	after, ok := pageCursor(w, r, parseAddTokenCursor)
	if !ok {
		return
	}
	toks, next, err := s.store.addTokens(r.Context(), p.account, after, maxAddTokensListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]addTokenAnswer, len(toks))
	for i, t := range toks {
		out[i] = addTokenAnswer{ID: t.id, MaxUses: t.maxUses, Uses: t.uses, ExpiresAt: rfc3339(t.expires), CreatedAt: rfc3339(t.created)}
	}
	ans := struct {
		Tokens  []addTokenAnswer `json:"tokens"`
		HasMore bool             `json:"has_more"`
		Next    string           `json:"next,omitempty"`
	}{Tokens: out, HasMore: next != nil}
	if next != nil {
		ans.Next = next.String()
	}
	writeJSON(w, http.StatusOK, ans)
}

// DELETE /v1/contacts/tokens/{id} → 204
//
// Revokes one of the caller's add-tokens at once; anyone else's id is 404.
func (s *Server) handleRevokeAddToken(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	if err := s.store.revokeAddToken(r.Context(), p.account, r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// validAddToken reports whether tok looks like an add-token (the check
// before hashing; an unknown one is refused by the store).
func validAddToken(tok string) bool {
	return strings.HasPrefix(tok, prefixAddToken) && len(tok) <= 128 && storable(tok)
}
