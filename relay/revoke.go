package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// RevocationSource reports revoked subjects. Revocations carry increasing
// ids: RevokedSince returns the subjects revoked after the given id and the
// id to ask after next time.
type RevocationSource interface {
	RevokedSince(ctx context.Context, after int64) (subs []string, next int64, err error)
}

func (s *Server) isRevoked(sub string) bool {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	_, ok := s.revoked[sub]
	return ok
}

// loadRevoked restores the revoked set and the polling cursor, so a
// restarted relay keeps refusing.
func (s *Server) loadRevoked(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT sub FROM revoked`)
	if err != nil {
		return fmt.Errorf("relay: load revocations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sub string
		if err := rows.Scan(&sub); err != nil {
			return fmt.Errorf("relay: load revocations: %w", err)
		}
		s.revoked[sub] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("relay: load revocations: %w", err)
	}
	err = s.db.QueryRowContext(ctx, `SELECT value FROM state WHERE key = 'revocations_after'`).Scan(&s.revAfter)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("relay: load revocations: %w", err)
	}
	return nil
}

func (s *Server) pollRevocations(ctx context.Context) {
	t := time.NewTicker(s.cfg.RevocationPoll)
	defer t.Stop()
	for {
		s.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) pollOnce(ctx context.Context) {
	for range 100 { // a bounded catch-up per tick
		subs, next, err := s.cfg.Revocations.RevokedSince(ctx, s.revAfter)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("relay: revocation poll failed", "err", err)
			}
			return
		}
		if err := s.revoke(ctx, subs, next); err != nil {
			s.log.Error("relay: storing revocations failed", "err", err)
			return
		}
		if len(subs) == 0 || next <= s.revAfter {
			s.revAfter = max(s.revAfter, next)
			return
		}
		s.revAfter = next
	}
}

// revoke records subs as revoked (durably, then in memory) and closes their
// live connections.
func (s *Server) revoke(ctx context.Context, subs []string, next int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, sub := range subs {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO revoked (sub) VALUES (?)`, sub); err != nil {
			return err
		}
	}
	if next > s.revAfter {
		if _, err := tx.ExecContext(ctx, `INSERT INTO state (key, value) VALUES ('revocations_after', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, next); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if len(subs) == 0 {
		return nil
	}
	s.revMu.Lock()
	for _, sub := range subs {
		s.revoked[sub] = struct{}{}
	}
	s.revMu.Unlock()
	for _, sub := range subs {
		for _, c := range s.hub.connsOf(sub) {
			s.log.Info("relay: closing connection of revoked subject", "remote", c.remote, "sub", sub)
			c.closeWith(websocket.StatusPolicyViolation, "subject revoked",
				errorFrame("forbidden", "subject is revoked"), true)
		}
	}
	return nil
}

// NewHTTPRevocations returns a RevocationSource that polls a directory's
// GET /v1/internal/revocations endpoint with the internal secret. A nil
// client means http.DefaultClient.
func NewHTTPRevocations(directoryURL, internalSecret string, client *http.Client) RevocationSource {
	if client == nil {
		client = http.DefaultClient
	}
	return &httpRevocations{base: strings.TrimRight(directoryURL, "/"), secret: internalSecret, client: client}
}

type httpRevocations struct {
	base   string
	secret string
	client *http.Client
}

func (h *httpRevocations) RevokedSince(ctx context.Context, after int64) ([]string, int64, error) {
	u := h.base + "/v1/internal/revocations?" + url.Values{"after": {strconv.FormatInt(after, 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("relay: revocations request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+h.secret)
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("relay: revocations request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, 0, fmt.Errorf("relay: revocations request: status %d", resp.StatusCode)
	}
	var body struct {
		Subs []string `json:"subs"`
		Next int64    `json:"next"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&body); err != nil {
		return nil, 0, fmt.Errorf("relay: revocations response: %w", err)
	}
	return body.Subs, body.Next, nil
}
