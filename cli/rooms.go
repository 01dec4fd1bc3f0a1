package cli

import (
	"context"
	"errors"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
)

// roomCommands are the room group and the commands that read and write
// a room's messages.
func roomCommands() []*ucli.Command {
	return []*ucli.Command{
		roomCommand(),
		msgCommand(),
		historyCommand(),
		watchCommand(),
	}
}

// roomCommand is `tally room`, the group of the room commands.
func roomCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "room",
		Usage: "create, join and manage rooms (MLS groups on relay channels)",
		Description: "A room NAME is a channel name org/ns/svc; a bare name means <your org>/rooms/name.\n" +
			"Members in other orgs use the full name the owner's invite prints.",
		Subcommands: []*ucli.Command{
			roomListCommand(),
			roomCreateCommand(),
			roomInviteCommand(),
			roomJoinCommand(),
			roomAdmitCommand(),
			roomMembersCommand(),
			roomLeaveCommand(),
			roomDeclineCommand(),
			roomAddCommand(),
			roomAdminsCommand(),
			roomRemoveCommand(),
		},
	}
}

// roomAction runs f with the room channel resolved from the first
// argument. nargs is the exact argument count, or -n for at least n.
func roomAction(nargs int, usage string, f func(e *env, s *seat.Seat, ch string, rest []string) error) ucli.ActionFunc {
	return withSeat(roomBody(nargs, usage, f))
}

func roomBody(nargs int, usage string, f func(e *env, s *seat.Seat, ch string, rest []string) error) func(*env, *seat.Seat) error {
	return func(e *env, s *seat.Seat) error {
		args := e.args
		if (nargs >= 0 && len(args) != nargs) || (nargs < 0 && len(args) < -nargs) {
			return badUsage("wrong arguments", "usage: "+usage)
		}
		ch, err := s.Room(args[0]).Channel(e.c.Context)
		if err != nil {
			return err
		}
		return roomError(f(e, s, ch, args[1:]), shortRoom(e, s, ch))
	}
}

// roomError turns room errors into hints that name the room.
func roomError(err error, ch string) error {
	var re *seat.RoomError
	if ch == "" && errors.As(err, &re) {
		ch = re.Room
	}
	var ae *seat.APIError
	if errors.As(err, &ae) && ch != "" {
		switch ae.Code {
		case "not_owner":
			return notAllowed("only the owner of "+ch+" can do that", "")
		case "invalid_invite":
			return notAllowed("the invite token is invalid, expired or used up", "ask the owner of "+ch+" for a new one (`tally room invite`)")
		case "wrong_org":
			return &usageError{"rooms you create live under your own org, not " + ch, "use a bare name: `tally room create NAME`"}
		case "channel_not_found":
			return notFound("the directory has no room "+ch, "check the name, or create it with `tally room create`")
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, seat.ErrNoRooms):
		return notFound("this home has no rooms", "run `tally room create NAME`, or `tally room join NAME TOKEN` with an invite")
	case ch == "":
		return err
	case errors.Is(err, seat.ErrNoRoom):
		return notAllowed("not a member of "+ch, "run `tally room join "+ch+" TOKEN` with an invite from its owner, or `tally room create` to make a room")
	case errors.Is(err, seat.ErrRoomExists):
		return &usageError{"this home already has " + ch, "pick another name, or `tally room leave " + ch + "` first"}
	case errors.Is(err, seat.ErrNotOwner):
		return notAllowed("only the owner of "+ch+" can do that", "")
	case errors.Is(err, seat.ErrRoomLive):
		return &usageError{"other accounts are still members of " + ch + ", in the group this seat made there: a new room on it would split the room in two",
			"pick another name, or have its members leave first (`tally room leave " + ch + "`)"}
	case errors.Is(err, seat.ErrRemoveOwner):
		return notAllowed("nobody can remove the owner of "+ch, "see `tally room members "+ch+"` for the roles")
	case errors.Is(err, seat.ErrNotAdmin):
		return notAllowed("only the owner and admins of "+ch+" can remove or add others; nothing was sent",
			"ask the owner to make you an admin (`tally room admins add "+ch+" DID`), or ask an admin; see `tally room members "+ch+"`")
	case errors.Is(err, seat.ErrNoRoles):
		return &usageError{ch + " was created before rooms had roles, so it has no admins", "create a new room to have roles"}
	case errors.Is(err, mls.ErrRefusedByPolicy):
		return notAllowed("the room's roles do not allow that: "+err.Error(), "see `tally room members "+ch+"`")
	case errors.Is(err, seat.ErrNotMember):
		return notAllowed("this account is not a member of "+ch+" at the relay: the owner removed it, or has not admitted it yet",
			"ask the owner of "+ch+" for an invite and run `tally room join "+ch+" TOKEN`; `tally room leave "+ch+"` forgets the room")
	case errors.Is(err, seat.ErrRemovedRoom):
		return notAllowed("this seat was removed from "+ch, "ask the owner for a new invite; `tally room leave "+ch+"` forgets the room")
	}
	return err
}

// shortRoom is the name to type for a room: bare when it is in this
// seat's org's rooms.
func shortRoom(e *env, s *seat.Seat, ch string) string {
	if org, err := s.Org(e.c.Context); err == nil {
		if n, ok := strings.CutPrefix(ch, org+"/rooms/"); ok {
			return n
		}
	}
	return ch
}

// hasRoom reports whether this home has the room ch.
func hasRoom(e *env, s *seat.Seat, ch string) bool {
	rooms, err := s.Rooms(context.WithoutCancel(e.c.Context))
	if err != nil {
		return false
	}
	for _, r := range rooms {
		if r.Channel == ch {
			return true
		}
	}
	return false
}

// roomSuite is the short name of the room's cipher suite, "" if unknown.
func roomSuite(e *env, s *seat.Seat, ch string) string {
	cs, err := s.Room(ch).Suite(e.c.Context)
	if err != nil {
		return ""
	}
	return seat.SuiteName(cs)
}
