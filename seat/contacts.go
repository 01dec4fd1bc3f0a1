package seat

import (
	"context"
	"errors"
	"net/url"
	"time"
)

// Contacts: who may add this person to rooms.
//
// The directory lets an account claim this person's join offers, and
// leave Welcomes for them, only if it shares a room or an org with them,
// or holds an add-token they made ([Seat.ContactToken]). A token is a
// secret to hand to one person (or a few, with several uses); each add
// that needs it uses one use, and it can be revoked at any time
// ([Seat.ContactRevoke]).

// ContactToken is an add-token as its maker sees it. Token, the secret,
// is set only in the answer that made it.
type ContactToken struct {
	ID        string    `json:"id"`
	Token     string    `json:"token,omitempty"`
	MaxUses   int       `json:"max_uses"`
	Uses      int       `json:"uses"`
	ExpiresAt time.Time `json:"expires_at"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateAddToken makes an add-token of the caller (POST
// /v1/contacts/tokens); 0 means the directory's default for either.
func (c *DirectoryClient) CreateAddToken(ctx context.Context, maxUses, ttlSeconds int) (ContactToken, error) {
	in := map[string]int{}
	if maxUses != 0 {
		in["max_uses"] = maxUses
	}
	if ttlSeconds != 0 {
		in["ttl_seconds"] = ttlSeconds
	}
	var out ContactToken
	err := c.call(ctx, "POST", "/v1/contacts/tokens", in, &out)
	return out, err
}

// AddTokens lists the caller's add-tokens, newest first, without their
// secrets. It follows the directory's pages (at most 50 tokens each) up
// to the 100 an account holds.
func (c *DirectoryClient) AddTokens(ctx context.Context) ([]ContactToken, error) {
	var all []ContactToken
	after := ""
	for range maxAddTokenPages {
		var out struct {
			Tokens  []ContactToken `json:"tokens"`
			HasMore bool           `json:"has_more"`
			Next    string         `json:"next"`
		}
		path := "/v1/contacts/tokens"
		if after != "" {
			path += "?after=" + url.QueryEscape(after)
		}
		if err := c.call(ctx, "GET", path, nil, &out); err != nil {
			return all, err
		}
		all = append(all, out.Tokens...)
		if !out.HasMore {
			return all, nil
		}
		if out.Next == "" || out.Next == after {
			return all, errors.New("seat: the directory's add-token page has no cursor to go on from")
		}
		after = out.Next
	}
	return all, errors.New("seat: the directory's add-token pages do not end")
}

// maxAddTokenPages bounds the pages AddTokens follows: an account holds
// at most 100 live add-tokens, two pages, and tokens made while it reads
// may add a few.
const maxAddTokenPages = 8

// RevokeAddToken revokes one of the caller's add-tokens.
func (c *DirectoryClient) RevokeAddToken(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", "/v1/contacts/tokens/"+url.PathEscape(id), nil, nil)
}

// ContactToken makes an add-token: whoever holds it may add this person
// to rooms ([Room.Add] with the token), up to uses times within ttl.
// Zero means the directory's defaults.
func (s *Seat) ContactToken(ctx context.Context, ttl time.Duration, uses int) (ContactToken, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return ContactToken{}, err
	}
	return s.directory(key).CreateAddToken(ctx, uses, int(ttl/time.Second))
}

// ContactTokens lists this person's add-tokens (never their secrets).
func (s *Seat) ContactTokens(ctx context.Context) ([]ContactToken, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	return s.directory(key).AddTokens(ctx)
}

// ContactRevoke revokes an add-token by its id.
func (s *Seat) ContactRevoke(ctx context.Context, id string) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	return s.directory(key).RevokeAddToken(ctx, id)
}

// maxClaimsKept bounds the claims a home remembers: the newest are kept.
const maxClaimsKept = 1000

// recordClaims keeps the claims the directory reported in the home, for
// [Seat.ContactClaims], before they are acknowledged.
func (s *Seat) recordClaims(ctx context.Context, claims []StockClaim) error {
	if len(claims) == 0 {
		return nil
	}
	for _, c := range claims {
		if _, err := s.st.db.ExecContext(ctx,
			`INSERT INTO offer_claims (id, device, channel, claimed_by, last_resort, at) VALUES (?, ?, ?, ?, ?, ?)
			 ON CONFLICT (id) DO NOTHING`,
			c.ID, c.Device, c.Channel, c.ClaimedBy, c.LastResort, c.At.UnixMilli()); err != nil {
			return err
		}
	}
	_, err := s.st.db.ExecContext(ctx,
		`DELETE FROM offer_claims WHERE id NOT IN (SELECT id FROM offer_claims ORDER BY at DESC, id LIMIT ?)`, maxClaimsKept)
	return err
}

// ContactClaims lists the claims on this person's join offers seen so far
// (each sync reads them from the directory), newest first: which account
// claimed which device's offer, for which channel, and whether it was the
// last-resort one.
func (s *Seat) ContactClaims(ctx context.Context) ([]StockClaim, error) {
	rows, err := s.st.db.QueryContext(ctx,
		`SELECT id, device, channel, claimed_by, last_resort, at FROM offer_claims ORDER BY at DESC, id LIMIT ?`, maxClaimsKept)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []StockClaim{}
	for rows.Next() {
		var c StockClaim
		var at int64
		if err := rows.Scan(&c.ID, &c.Device, &c.Channel, &c.ClaimedBy, &c.LastResort, &at); err != nil {
			return nil, err
		}
		c.At = time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}
