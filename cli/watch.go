package cli

import (
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// watchCommand is `tally watch`.
func watchCommand() *ucli.Command {
	return &ucli.Command{
		Name: "watch", Usage: "print rooms' messages as they arrive (all rooms without a NAME)", ArgsUsage: "[NAME…]",
		Action: withSeat(runWatch),
	}
}

// runWatch runs `tally watch`.
func runWatch(e *env, s *seat.Seat) error {
	ctx := e.c.Context
	names := e.args
	for i, n := range names {
		ch, err := s.Room(n).Channel(ctx)
		if err != nil {
			return err
		}
		names[i] = ch
	}
	st := newStatus(e.c.App.ErrWriter)
	var lost time.Time // when the connection last dropped
	err := s.WatchWith(ctx, names, seat.WatchOptions{
		OnMessage: func(m seat.RoomMessage) { st.clear(); printMessage(e, s, m, false) },
		OnNotice:  func(m seat.RoomMessage) { st.clear(); printMessage(e, s, m, false) },
		OnCatchUp: func(room string, seq uint64) {
			if st.tty {
				st.update("catching up on %s: seq %d", shortRoom(e, s, room), seq)
			}
		},
		OnEvent: func(ev seat.WatchEvent) {
			st.clear()
			// Status goes to stderr, also with --json.
			switch {
			case ev.Connected && !lost.IsZero():
				showf(e.c.App.ErrWriter, "reconnected after %s; watching %s\n", time.Since(lost).Round(100*time.Millisecond), watchedList(e, s, names))
				lost = time.Time{}
			case ev.Connected:
				showf(e.c.App.ErrWriter, "watching %s; Ctrl-C stops\n", watchedList(e, s, names))
			default:
				if lost.IsZero() {
					lost = time.Now()
				}
				why := e.hintOrErr(ev.Err)
				if h := closedHint(ev.Err); h != nil && why == ev.Err {
					why = h
				}
				showf(e.c.App.ErrWriter, "not connected (%v); trying again in %s\n", why, ev.Retry.Round(100*time.Millisecond))
			}
		},
	})
	if len(names) == 1 {
		return roomError(err, names[0])
	}
	return roomError(err, "")
}

func watchedList(e *env, s *seat.Seat, names []string) string {
	if len(names) == 0 {
		return "all rooms"
	}
	short := make([]string, len(names))
	for i, n := range names {
		short[i] = shortRoom(e, s, n)
	}
	return strings.Join(short, ", ")
}
