package directory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxPendingListed bounds one page of GET /v1/channels/pending: 50
// requests, whose key packages (at most MaxKeyPackage each) come to at
// most 3.2 MiB, under the 4 MiB every blob answer keeps to. A channel may
// hold MaxPending (1000) requests, 64 MB of key packages, which the
// unpaged answer sent at once.
const maxPendingListed = 50

// pendingCursor is where a page of pending requests ends: the last
// request's creation time and its insertion order (SQLite's rowid,
// PostgreSQL's seq), the order the requests are listed in.
type pendingCursor struct{ at, order int64 }

func (c pendingCursor) String() string { return fmt.Sprintf("%d.%d", c.at, c.order) }

func parsePendingCursor(s string) (pendingCursor, bool) {
	a, o, ok := strings.Cut(s, ".")
	at, err1 := strconv.ParseInt(a, 10, 64)
	order, err2 := strconv.ParseInt(o, 10, 64)
	return pendingCursor{at, order}, ok && err1 == nil && err2 == nil && at >= 0 && order >= 0
}

// pendingPage returns up to limit of the pending requests of a channel
// the caller owns, oldest first, after the cursor (nil: from the start),
// and the cursor of the page after when there are more.
func (s *store) pendingPage(ctx context.Context, channel, account string, after *pendingCursor, limit int) ([]joinRequest, *pendingCursor, error) {
	chID, err := ownedChannel(ctx, s, channel, account)
	if err != nil {
		return nil, nil, err
	}
	c := pendingCursor{at: -1, order: -1}
	if after != nil {
		c = *after
	}
	order := s.b.InsertionOrder()
	rows, err := s.query(ctx,
		`SELECT id, identity, account_id, key_package, created_at, `+order+` FROM join_requests
		 WHERE channel_id = ? AND status = 'pending' AND (created_at > ? OR (created_at = ? AND `+order+` > ?))
		 ORDER BY created_at, `+order+` LIMIT ?`, chID, c.at, c.at, c.order, limit+1)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	reqs := []joinRequest{}
	var last pendingCursor
	for rows.Next() {
		if len(reqs) == limit {
			return reqs, &last, nil
		}
		var r joinRequest
		var created int64
		if err := rows.Scan(&r.id, &r.identity, &r.account, &r.keyPackage, &created, &last.order); err != nil {
			return nil, nil, err
		}
		last.at = created
		r.createdAt = time.Unix(0, created).UTC()
		reqs = append(reqs, r)
	}
	return reqs, nil, rows.Err()
}
