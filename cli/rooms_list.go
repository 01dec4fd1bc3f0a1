package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// roomListCommand is `tally room list`.
func roomListCommand() *ucli.Command {
	return &ucli.Command{
		Name: "list", Usage: "list this home's rooms (--pending: the rooms someone added you to, not joined yet)",
		Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "pending", Usage: "list the Welcomes waiting in your inbox instead, without joining them"}},
		Action: withSeat(runRoomList),
	}
}

// runRoomList runs `tally room list`.
func runRoomList(e *env, s *seat.Seat) error {
	if len(e.args) != 0 {
		return badUsage("tally room list takes no arguments", "tally room list [--pending]")
	}
	if e.c.Bool("pending") {
		return listPending(e, s)
	}
	// Rooms someone added this seat to while it was away.
	s.Arrivals(e.c.Context)
	rooms, err := s.Rooms(e.c.Context)
	if err != nil {
		return err
	}
	if e.json {
		list := []map[string]any{}
		for _, r := range rooms {
			list = append(list, map[string]any{"room": r.Channel, "name": shortRoom(e, s, r.Channel), "role": r.Role, "last_seq": r.LastSeq,
				"suite": seat.SuiteName(r.Suite)})
		}
		e.out(map[string]any{"rooms": list}, "")
		return nil
	}
	if len(rooms) == 0 {
		fmt.Fprintln(e.c.App.ErrWriter, "this home has no rooms: run `tally room create NAME`, or `tally room join NAME TOKEN` with an invite")
		return nil
	}
	for _, r := range rooms {
		showf(e.c.App.Writer, "%-24s %-6s %s\n", shortRoom(e, s, r.Channel), r.Role, seat.SuiteName(r.Suite))
	}
	return nil
}

// listPending is `tally room list --pending`: the Welcomes waiting in the
// inbox for this device, not joined.
func listPending(e *env, s *seat.Seat) error {
	pending, err := s.PendingRooms(e.c.Context)
	if err != nil {
		return err
	}
	if e.json {
		list := []map[string]any{}
		for _, p := range pending {
			list = append(list, map[string]any{"room": p.Channel, "from": p.From, "at": p.At})
		}
		e.out(map[string]any{"pending": list}, "")
		return nil
	}
	if len(pending) == 0 {
		fmt.Fprintln(e.c.App.ErrWriter, "no rooms wait for you")
		return nil
	}
	for _, p := range pending {
		showf(e.c.App.Writer, "%-24s added by account %s  %s\n", p.Channel, p.From, p.At.Local().Format("2006-01-02 15:04"))
	}
	fmt.Fprintln(e.c.App.ErrWriter, "your next `tally room list` joins them; `tally room decline NAME` declines one")
	return nil
}

// roomDeclineCommand is `tally room decline`.
func roomDeclineCommand() *ucli.Command {
	return &ucli.Command{
		Name: "decline", Usage: "decline a room someone added you to (see `tally room list --pending`); the adder is told nothing", ArgsUsage: "NAME",
		Action: withSeat(runRoomDecline),
	}
}

// runRoomDecline runs `tally room decline`.
func runRoomDecline(e *env, s *seat.Seat) error {
	if len(e.args) != 1 {
		return badUsage("wrong arguments", "usage: tally room decline NAME")
	}
	ch, err := pendingChannel(e, s, e.args[0])
	if err != nil {
		return err
	}
	n, err := s.Room(ch).Decline(e.c.Context)
	if errors.Is(err, seat.ErrNotPending) {
		return notFound("no Welcome to "+ch+" waits for you", "see `tally room list --pending`")
	}
	if err != nil {
		return err
	}
	e.out(map[string]any{"room": ch, "declined": n}, "declined %s: you will not join it", ch)
	return nil
}

// pendingChannel resolves NAME for decline: a full channel name, or the
// one pending room whose name ends in /NAME.
func pendingChannel(e *env, s *seat.Seat, name string) (string, error) {
	if strings.Count(name, "/") == 2 {
		return name, nil
	}
	pending, err := s.PendingRooms(e.c.Context)
	if err != nil {
		return "", err
	}
	var match []string
	for _, p := range pending {
		if strings.HasSuffix(p.Channel, "/"+name) && !slices.Contains(match, p.Channel) {
			match = append(match, p.Channel)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return "", notFound("no Welcome to a room called "+name+" waits for you", "see `tally room list --pending`")
	}
	return "", &usageError{name + " names several pending rooms: " + strings.Join(match, ", "), "give the full name"}
}
