package relay

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/internal/feed"
)

// ChannelEvent is one change to a channel's membership or commit fence, as
// the directory's channel feed carries it.
type ChannelEvent = feed.Event

// Kinds of ChannelEvent.
const (
	EventMemberAdded   = feed.MemberAdded
	EventMemberRemoved = feed.MemberRemoved
	EventFenceReset    = feed.FenceReset
)

// MembershipSource reports changes to channels in order. ChannelEventsSince
// returns the events after the given id and the id to ask after next time.
type MembershipSource interface {
	ChannelEventsSince(ctx context.Context, after int64) (events []ChannelEvent, next int64, err error)
}

// DefaultMembersPoll is the default of Config.MembersPoll.
const DefaultMembersPoll = time.Second

// The relay's view of channel membership: what it has learned from
// Config.Members, kept in the members table with the feed cursor
// ('members_after') and in memory. Checking a member is a map lookup under
// a read lock; an account the relay does not know as a member of a
// channel makes it poll the source at once before it refuses, so a
// channel registered or a member admitted a moment ago works at once.

// gated reports whether the relay checks membership at all.
func (s *Server) gated() bool { return !s.cfg.OpenChannels }

// readsGated reports whether subscribe and the catch-up reads need
// membership.
func (s *Server) readsGated() bool { return !s.cfg.OpenChannels && !s.cfg.OpenReads }

func (s *Server) isMember(ch, sub string) bool {
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	_, ok := s.members[ch][sub]
	return ok
}

// checkMember reports whether sub is a member of ch, polling the source
// first when the relay does not know it as one. Polls that misses start
// are spaced at least missGap apart: a miss joins the poll window already
// scheduled, or schedules the next one (at once if the last is missGap
// old), and all misses of a window share one round. So a stranger's flood
// costs the directory at most one poll per missGap, and a legitimate miss
// waits at most missGap longer than the poll itself.
func (s *Server) checkMember(ctx context.Context, ch, sub string) bool {
	if !s.gated() || s.isMember(ch, sub) {
		return true
	}
	if s.mem == nil {
		return false
	}
	since := time.Now()
	if d := time.Until(s.missWindow(since)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		case <-s.bgCtx.Done():
			t.Stop()
			return false
		}
	}
	s.mem.await(ctx, since, true)
	return s.isMember(ch, sub)
}

// missWindow returns when the poll a miss at now may start.
func (s *Server) missWindow(now time.Time) time.Time {
	s.missMu.Lock()
	defer s.missMu.Unlock()
	if s.missNext.Before(now) {
		if now.Sub(s.missNext) >= s.missGap {
			s.missNext = now
		} else {
			s.missNext = s.missNext.Add(s.missGap)
		}
	}
	return s.missNext
}

// loadMembers restores the members the relay has learned and the feed
// cursor. A MemberSet lives only in the embedding process, so with one the
// relay starts from its current contents instead of what an earlier run
// stored.
func (s *Server) loadMembers(ctx context.Context) error {
	if _, ok := s.cfg.Members.(*MemberSet); ok {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM members; DELETE FROM state WHERE key = 'members_after'`); err != nil {
			return fmt.Errorf("relay: reset members: %w", err)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT channel, sub FROM members`)
	if err != nil {
		return fmt.Errorf("relay: load members: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ch, sub string
		if err := rows.Scan(&ch, &sub); err != nil {
			return fmt.Errorf("relay: load members: %w", err)
		}
		s.addMemberLocked(ch, sub)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("relay: load members: %w", err)
	}
	return s.mem.loadCursor(ctx)
}

func (s *Server) addMemberLocked(ch, sub string) {
	m := s.members[ch]
	if m == nil {
		m = make(map[string]struct{})
		s.members[ch] = m
	}
	m[sub] = struct{}{}
}

func (s *Server) newMembersPoller() *feedPoller[ChannelEvent] {
	return &feedPoller[ChannelEvent]{
		s: s, name: "channel events", key: "members_after", health: feedHealth{name: "members"},
		fetch: func(ctx context.Context, after int64) ([]ChannelEvent, int64, error) {
			return s.cfg.Members.ChannelEventsSince(ctx, after)
		},
		prepare: s.resetFences,
		store: func(ctx context.Context, tx *sql.Tx, evs []ChannelEvent) error {
			for _, e := range evs {
				var err error
				switch e.Kind {
				case EventMemberAdded:
					_, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO members (channel, sub) VALUES (?, ?)`, e.Channel, e.Account)
				case EventMemberRemoved:
					_, err = tx.ExecContext(ctx, `DELETE FROM members WHERE channel = ? AND sub = ?`, e.Channel, e.Account)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
		apply: s.applyChannelEvents,
	}
}

// resetFences applies a page's fence resets to the archive. They go first,
// before the page's cursor is stored, so a crash in between repeats them
// rather than losing them.
func (s *Server) resetFences(ctx context.Context, evs []ChannelEvent) error {
	for _, e := range evs {
		if e.Kind != EventFenceReset {
			continue
		}
		// The directory's event ids are durable, so a cluster's nodes
		// apply a reset once by its id; a MemberSet's restart with the
		// process, so its resets apply as they come.
		id := e.ID
		if _, ok := s.cfg.Members.(*MemberSet); ok {
			id = 0
		}
		if err := s.arch.ResetFence(e.Channel, e.Epoch, id); err != nil {
			return fmt.Errorf("fence reset of %s: %w", e.Channel, err)
		}
		s.log.Info("relay: commit fence reset", "channel", e.Channel, "epoch", e.Epoch)
	}
	return nil
}

// applyChannelEvents updates the members in memory and ends the live
// subscriptions of removed members.
func (s *Server) applyChannelEvents(evs []ChannelEvent) {
	var removed []ChannelEvent
	s.memMu.Lock()
	for _, e := range evs {
		switch e.Kind {
		case EventMemberAdded:
			s.addMemberLocked(e.Channel, e.Account)
		case EventMemberRemoved:
			if m := s.members[e.Channel]; m != nil {
				delete(m, e.Account)
				if len(m) == 0 {
					delete(s.members, e.Channel)
				}
			}
			removed = append(removed, e)
		}
	}
	s.memMu.Unlock()
	if len(removed) == 0 {
		return
	}
	// Connections compare this with what they saw last before each frame
	// and drop what they cached about the channels they are on.
	s.memGen.Add(1)
	for _, e := range removed {
		if s.isMember(e.Channel, e.Account) {
			continue // added back later in the same page
		}
		for _, c := range s.hub.connsOf(e.Account) {
			c.removedFrom(e.Channel)
		}
	}
}

// removedFrom ends c's subscription to ch after its account was removed
// from the channel: it leaves the channel's subscribers at once (the
// reader drops its own record before its next frame) and is told why. The
// socket stays open for its other channels. With OpenReads the removed
// account may still read, so only its publishes are refused.
func (c *conn) removedFrom(ch string) {
	if !c.srv.readsGated() {
		return
	}
	if c.srv.hub.unsubscribe(ch, c) {
		c.srv.log.Info("relay: subscription ended, no longer a member", "remote", c.remote, "sub", c.sub)
		c.push(channelErrorFrame("not_a_member", ch, "no longer a member of "+ch+"; the subscription has ended"))
	}
}

// syncMembership drops what the reader cached about its channels when a
// membership removal happened since it last looked: subscriptions of a
// channel its account left, and the known-member marks that let its
// publishes skip the check.
func (c *conn) syncMembership() {
	g := c.srv.memGen.Load()
	if g == c.memGen {
		return
	}
	c.memGen = g
	for ch := range c.subs {
		if c.srv.isMember(ch, c.sub) {
			continue
		}
		if c.srv.readsGated() {
			delete(c.subs, ch)
			c.srv.hub.unsubscribe(ch, c)
		} else {
			c.subs[ch] = false
		}
	}
}

// NewHTTPMembers returns a MembershipSource that polls a directory's
// GET /v1/internal/channels/events endpoint with the internal secret. A nil
// client means http.DefaultClient. directoryURL may name several
// directories of one database, separated by commas, as for
// NewHTTPRevocations.
func NewHTTPMembers(directoryURL, internalSecret string, client *http.Client) MembershipSource {
	return &httpMembers{newInternalFeed(directoryURL, internalSecret, client)}
}

type httpMembers struct{ f internalFeed }

func (h *httpMembers) ChannelEventsSince(ctx context.Context, after int64) ([]ChannelEvent, int64, error) {
	var page feed.Page
	if err := h.f.get(ctx, "/v1/internal/channels/events", after, &page); err != nil {
		return nil, 0, err
	}
	return page.Events, page.Next, nil
}

// MemberSet is a MembershipSource for an application that knows its own
// channels' members and embeds a relay without a directory: it Adds and
// Removes accounts (JWT subjects) and the relay follows within
// Config.MembersPoll, or at once for an account it does not know yet. The
// relay takes a MemberSet's contents as they are when it starts, whatever
// an earlier run stored. The zero MemberSet is not usable; call
// NewMemberSet. Its methods are safe for concurrent use.
type MemberSet struct {
	mu      sync.Mutex
	members map[string]map[string]struct{}
	log     []ChannelEvent // every change, in order; an event's ID is its index+1
}

// NewMemberSet returns an empty MemberSet.
func NewMemberSet() *MemberSet {
	return &MemberSet{members: make(map[string]map[string]struct{})}
}

// Add makes account a member of channel; adding a member again changes
// nothing.
func (m *MemberSet) Add(channel, account string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.members[channel]
	if set == nil {
		set = make(map[string]struct{})
		m.members[channel] = set
	}
	if _, ok := set[account]; ok {
		return
	}
	set[account] = struct{}{}
	m.appendLocked(ChannelEvent{Kind: EventMemberAdded, Channel: channel, Account: account})
}

// Remove ends account's membership of channel; its live subscriptions
// there end too.
func (m *MemberSet) Remove(channel, account string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.members[channel]
	if _, ok := set[account]; !ok {
		return
	}
	delete(set, account)
	if len(set) == 0 {
		delete(m.members, channel)
	}
	m.appendLocked(ChannelEvent{Kind: EventMemberRemoved, Channel: channel, Account: account})
}

// ResetFence makes the relay expect the next commit on channel at epoch,
// whatever it expected before: the recovery when a member jammed the fence
// with a commit the group never made.
func (m *MemberSet) ResetFence(channel string, epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appendLocked(ChannelEvent{Kind: EventFenceReset, Channel: channel, Epoch: epoch})
}

// IsMember reports whether account is a member of channel.
func (m *MemberSet) IsMember(channel, account string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.members[channel][account]
	return ok
}

func (m *MemberSet) appendLocked(e ChannelEvent) {
	e.ID = int64(len(m.log)) + 1
	m.log = append(m.log, e)
}

// ChannelEventsSince implements MembershipSource.
func (m *MemberSet) ChannelEventsSince(ctx context.Context, after int64) ([]ChannelEvent, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int64(len(m.log))
	if after < 0 {
		after = 0
	}
	if after >= n {
		return nil, after, nil
	}
	end := min(n, after+feed.PageSize)
	return append([]ChannelEvent(nil), m.log[after:end]...), end, nil
}

var _ MembershipSource = (*MemberSet)(nil)
