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
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// RevocationSource reports revoked subjects. Revocations carry increasing
// ids: RevokedSince returns the subjects revoked after the given id and the
// id to ask after next time.
type RevocationSource interface {
	RevokedSince(ctx context.Context, after int64) (subs []string, next int64, err error)
}

// pollRound bounds one round of polling a feed, so a hung source cannot
// hold the relay's readers.
const pollRound = 10 * time.Second

// feedPoller follows one of the directory's feeds (revocations, channel
// events): it asks the source for what came after its cursor, stores each
// page and the new cursor in one transaction, then applies the page to the
// relay's memory. Rounds never overlap: whoever needs a round that started
// after some moment shares the running one if it started late enough, or
// else the one queued after it, which all such callers share.
type feedPoller[T any] struct {
	s     *Server
	name  string // for logs
	key   string // the cursor's key in the state table
	fetch func(ctx context.Context, after int64) ([]T, int64, error)
	// store writes a page in the cursor's transaction; apply then makes
	// it take effect. prepare, if set, runs before the transaction; when
	// it fails, the page is not stored and is fetched again next round.
	prepare func(ctx context.Context, items []T) error
	store   func(ctx context.Context, tx *sql.Tx, items []T) error
	apply   func(items []T)

	after int64 // the cursor; owned by the round in progress

	health feedHealth // ready.go

	mu        sync.Mutex // guards the following fields
	running   bool
	curStart  time.Time     // when the running round started
	cur       chan struct{} // closed when the running round is done
	next      chan struct{} // closed when the next round to start is done
	startNext bool          // someone asked for the next round to start
}

// loadCursor reads the durable cursor.
func (p *feedPoller[T]) loadCursor(ctx context.Context) error {
	err := p.s.db.QueryRowContext(ctx, `SELECT value FROM state WHERE key = ?`, p.key).Scan(&p.after)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("relay: load %s cursor: %w", p.name, err)
	}
	return nil
}

// run polls every interval until ctx ends.
func (p *feedPoller[T]) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.await(ctx, time.Now(), true)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// await waits for a round that started at or after since: the running
// round if it started late enough, else the next one, which start makes
// begin as soon as the running one ends (without start, whoever asks next
// with start begins it: the ticker at the latest). The caller that begins
// a round runs it, so no goroutine outlives the callers.
func (p *feedPoller[T]) await(ctx context.Context, since time.Time, start bool) {
	p.mu.Lock()
	var wait chan struct{}
	run := false
	if p.running && !p.curStart.Before(since) {
		wait = p.cur
	} else {
		if p.next == nil {
			p.next = make(chan struct{})
		}
		wait = p.next
		if start {
			p.startNext = true
		}
		run = p.startNext && !p.running
		if run {
			p.running = true
		}
	}
	p.mu.Unlock()
	if run {
		p.runRounds()
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
}

func (p *feedPoller[T]) runRounds() {
	for {
		p.mu.Lock()
		if !p.startNext || p.next == nil {
			p.running = false
			p.mu.Unlock()
			return
		}
		done := p.next
		p.cur, p.curStart = done, time.Now()
		p.next, p.startNext = nil, false
		p.mu.Unlock()
		p.round(p.s.bgCtx)
		close(done)
	}
}

// round reads the feed until it is caught up (at most 100 pages).
func (p *feedPoller[T]) round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, pollRound)
	defer cancel()
	start := time.Now()
	for range 100 {
		items, next, err := p.fetch(ctx, p.after)
		if err != nil {
			p.health.fails.Add(1)
			if ctx.Err() == nil {
				p.s.log.Warn("relay: "+p.name+" poll failed", "err", err)
			}
			return
		}
		if err := p.storePage(ctx, items, next); err != nil {
			p.health.fails.Add(1)
			if ctx.Err() == nil {
				p.s.log.Error("relay: storing "+p.name+" failed", "err", err)
			}
			return
		}
		if len(items) == 0 || next <= p.after {
			p.after = max(p.after, next)
			p.health.okAt.Store(start.UnixNano())
			return
		}
		p.after = next
	}
}

func (p *feedPoller[T]) storePage(ctx context.Context, items []T, next int64) error {
	if len(items) == 0 && next <= p.after {
		return nil // nothing new: no transaction
	}
	if len(items) > 0 && p.prepare != nil {
		if err := p.prepare(ctx, items); err != nil {
			return err
		}
	}
	tx, err := p.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if len(items) > 0 {
		if err := p.store(ctx, tx, items); err != nil {
			return err
		}
	}
	if next > p.after {
		if _, err := tx.ExecContext(ctx, `INSERT INTO state (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, p.key, next); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if len(items) > 0 {
		p.apply(items)
	}
	return nil
}

func (s *Server) newRevocationPoller() *feedPoller[string] {
	return &feedPoller[string]{
		s: s, name: "revocations", key: "revocations_after", health: feedHealth{name: "revocations"},
		fetch: func(ctx context.Context, after int64) ([]string, int64, error) {
			return s.cfg.Revocations.RevokedSince(ctx, after)
		},
		store: func(ctx context.Context, tx *sql.Tx, subs []string) error {
			for _, sub := range subs {
				if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO revoked (sub) VALUES (?)`, sub); err != nil {
					return err
				}
			}
			return nil
		},
		apply: s.applyRevoked,
	}
}

func (s *Server) isRevoked(sub string) bool {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	_, ok := s.revoked[sub]
	return ok
}

// isRevokedClaims reports whether a token's subject, or the linked device
// it was minted for (its dev claim), is revoked. A device's revocation
// comes in the feed as "<sub>#<device>": it ends that device's tokens and
// leaves the account's others alone.
func (s *Server) isRevokedClaims(sub, dev string) bool {
	return s.isRevoked(sub) || dev != "" && s.isRevoked(sub+"#"+dev)
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
	return s.rev.loadCursor(ctx)
}

// applyRevoked adds stored revocations to the revoked set and closes the
// subjects' live connections.
func (s *Server) applyRevoked(subs []string) {
	s.revMu.Lock()
	for _, sub := range subs {
		s.revoked[sub] = struct{}{}
	}
	s.revMu.Unlock()
	s.counters.revocations.Add(uint64(len(subs)))
	for _, sub := range subs {
		account, dev, isDevice := strings.Cut(sub, "#")
		for _, c := range s.hub.connsOf(account) {
			if isDevice && c.dev != dev {
				continue
			}
			s.log.Info("relay: closing connection of revoked subject", "remote", c.remote, "sub", sub)
			c.closeWith(websocket.StatusPolicyViolation, "subject revoked",
				backend.ErrorFrame("forbidden", "subject is revoked"), true)
		}
	}
}

// NewHTTPRevocations returns a RevocationSource that polls a directory's
// GET /v1/internal/revocations endpoint with the internal secret. A nil
// client means http.DefaultClient. directoryURL may name several
// directories of one database, separated by commas: the relay reads from
// the one that answered last and moves to the next when it does not
// answer (see internalFeed).
func NewHTTPRevocations(directoryURL, internalSecret string, client *http.Client) RevocationSource {
	return &httpRevocations{newInternalFeed(directoryURL, internalSecret, client)}
}

type httpRevocations struct{ f internalFeed }

func (h *httpRevocations) RevokedSince(ctx context.Context, after int64) ([]string, int64, error) {
	var body struct {
		Subs []string `json:"subs"`
		Next int64    `json:"next"`
	}
	if err := h.f.get(ctx, "/v1/internal/revocations", after, &body); err != nil {
		return nil, 0, err
	}
	return body.Subs, body.Next, nil
}

// internalFeed reads one of a directory's internal feeds:
// GET <path>?after=N with the internal secret as the bearer token. With
// several directories (of one database: their feeds are the database's
// rows, and the ids a cursor holds mean the same on each), a read goes to
// the directory that answered last, and to the next in turn when that one
// fails or does not answer within its share of the read's time, so a
// directory that died or hangs costs a poll at most that share.
type internalFeed struct {
	directories *httpx.Peers
	secret      string
	client      *http.Client
}

func newInternalFeed(directoryURL, internalSecret string, client *http.Client) internalFeed {
	if client == nil {
		client = http.DefaultClient
	}
	return internalFeed{directories: httpx.NewPeers(directoryURL), secret: internalSecret, client: client}
}

// feedTry bounds one directory's answer when there are others to ask.
const feedTry = 3 * time.Second

func (f internalFeed) get(ctx context.Context, path string, after int64, out any) error {
	return f.directories.Try(ctx, feedTry, func(ctx context.Context, base string) error {
		return f.getFrom(ctx, base, path, after, out)
	})
}

// maxFeedPage bounds the body of one feed page.
const maxFeedPage = 16 << 20

func (f internalFeed) getFrom(ctx context.Context, base, path string, after int64, out any) error {
	u := base + path + "?" + url.Values{"after": {strconv.FormatInt(after, 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("relay: %s request: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+f.secret)
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("relay: %s request: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("relay: %s request: status %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxFeedPage)).Decode(out); err != nil {
		return fmt.Errorf("relay: %s response: %w", path, err)
	}
	return nil
}
