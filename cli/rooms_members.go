package cli

import (
	"errors"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// roomMembersCommand is `tally room members`.
func roomMembersCommand() *ucli.Command {
	return &ucli.Command{
		Name: "members", Usage: "list a room's members", ArgsUsage: "NAME",
		Action: roomAction(1, "tally room members NAME", runRoomMembers),
	}
}

// runRoomMembers runs `tally room members`.
func runRoomMembers(e *env, s *seat.Seat, ch string, _ []string) error {
	roster, err := s.Room(ch).Members(e.c.Context)
	if err != nil {
		return err
	}
	mem, epoch := roster.Members, roster.Epoch
	if e.json {
		list := []map[string]any{}
		for _, m := range mem {
			list = append(list, map[string]any{"identity": m.Identity, "person": m.Person, "short": shortID(m.Identity), "name": m.Name,
				"leaf": m.Leaf, "self": m.Self, "role": m.Role})
		}
		e.out(map[string]any{"room": ch, "epoch": epoch, "suite": roomSuite(e, s, ch), "members": list}, "")
		return nil
	}
	showf(e.c.App.Writer, "%s: %s, epoch %d, suite %s\n", shortRoom(e, s, ch), plural(len(mem), "member", "members"), epoch, roomSuite(e, s, ch))
	for _, m := range mem {
		you := ""
		if m.Self {
			you = "  (you)"
		}
		role := m.Role
		if role == "" {
			role = "-" // a room from before roles
		}
		device := ""
		if m.Identity != m.Person {
			device = "  device " + seat.DeviceID(m.Identity)
		}
		showf(e.c.App.Writer, "  %-6s %s%s%s\n", role, personLabel(e, m.Person, m.Name), device, you)
	}
	return nil
}

// roomAddCommand is `tally room add`.
func roomAddCommand() *ucli.Command {
	return &ucli.Command{
		Name: "add", Usage: "add a person, even one who is offline, from the join offers their devices left (owner or admin)", ArgsUsage: "NAME WHO",
		Description: "WHO is the person's account id or did:key (`tally whoami` shows both), or an add-token\n" +
			"they gave you (`tally contact token`). You may add a person who shares a room or an org with\n" +
			"you; anyone else only with their add-token (WHO, or --token with their id).",
		Flags:  []ucli.Flag{&ucli.StringFlag{Name: "token", Usage: "the person's add-token (skt_add_…), if you share no room or org with them"}},
		Action: roomAction(2, "tally room add NAME WHO", runRoomAdd),
	}
}

// runRoomAdd runs `tally room add`.
func runRoomAdd(e *env, s *seat.Seat, ch string, args []string) error {
	who := args[0]
	var added []seat.Added
	var err error
	if strings.HasPrefix(who, "skt_add_") {
		added, err = s.Room(ch).Add(e.c.Context, who, nil)
		who = "the token's maker"
	} else {
		added, err = s.Room(ch).Add(e.c.Context, who, &seat.AddOptions{Token: e.c.String("token")})
	}
	if errors.Is(err, seat.ErrNotAllowed) {
		return notAllowed(who+" has not agreed to be added by you: you share no room or org",
			"ask them for an add-token (`tally contact token`) and run `tally room add "+shortRoom(e, s, ch)+" TOKEN`")
	}
	if errors.Is(err, seat.ErrInvalidAddToken) {
		return notAllowed("the add-token is invalid, expired, used up or revoked", "ask the person for a new one (`tally contact token`)")
	}
	if err != nil {
		return err
	}
	if e.json {
		list := []map[string]any{}
		for _, a := range added {
			list = append(list, map[string]any{"identity": a.Identity, "last_resort": a.LastResort})
		}
		e.out(map[string]any{"room": ch, "account": who, "added": list}, "")
		return nil
	}
	if len(added) == 0 {
		return fmt.Errorf("none of %s's join offers could be added to %s", who, shortRoom(e, s, ch))
	}
	e.out(nil, "added %s of %s to %s; each joins on its next command", plural(len(added), "device", "devices"), who, shortRoom(e, s, ch))
	return nil
}

// roomRemoveCommand is `tally room remove`.
func roomRemoveCommand() *ucli.Command {
	return &ucli.Command{
		Name: "remove", Usage: "remove a member (a commit; they cannot read further messages)", ArgsUsage: "NAME MEMBER",
		Action: roomAction(2, "tally room remove NAME MEMBER", runRoomRemove),
	}
}

// runRoomRemove runs `tally room remove`.
func runRoomRemove(e *env, s *seat.Seat, ch string, args []string) error {
	_, did, err := resolveMember(e, s, ch, args[0])
	if err != nil {
		return err
	}
	if did == "" {
		return &usageError{fmt.Sprintf("%s has more than one device in %s", args[0], shortRoom(e, s, ch)),
			"name the device's whole identity (`tally room members " + shortRoom(e, s, ch) + " --verbose`)"}
	}
	rm, err := s.Room(ch).Remove(e.c.Context, did)
	if err != nil {
		return err
	}
	note := "its account no longer reaches the room at the relay"
	switch {
	case rm.OtherSeats:
		note = "its account keeps its membership of the channel: other seats of that account are still in the room"
	case rm.OwnerEnds:
		note = "the owner's seat ends its account's membership of the channel when it next reads the room"
	case rm.AccountID == "":
		note = "this home did not learn its account when admitting it, so the account's membership of the channel is unchanged (the commit alone keeps it from new messages)"
	}
	e.out(map[string]any{"room": ch, "removed": did, "account_id": rm.AccountID, "membership_ended": rm.MembershipEnded},
		"removed %s from %s; %s", displayID(e, did), shortRoom(e, s, ch), note)
	return nil
}

// roomLeaveCommand is `tally room leave`.
func roomLeaveCommand() *ucli.Command {
	return &ucli.Command{
		Name: "leave", Usage: "leave a room: propose your removal, and forget the room on this home", ArgsUsage: "NAME",
		Action: roomAction(1, "tally room leave NAME", runRoomLeave),
	}
}

// runRoomLeave runs `tally room leave`.
func runRoomLeave(e *env, s *seat.Seat, ch string, _ []string) error {
	if err := s.Room(ch).Leave(e.c.Context); err != nil {
		return err
	}
	e.out(map[string]any{"room": ch, "left": true},
		"left %s: your removal is proposed (the next admin, or member who sends, commits it), this account is no longer a member of its channel, and this home forgot it", shortRoom(e, s, ch))
	return nil
}

// roomAdminsCommand is `tally room admins`.
func roomAdminsCommand() *ucli.Command {
	return &ucli.Command{
		Name: "admins", Usage: "name or unname the room's admins (owner only)",
		Description: "Admins may add and remove members, like the owner; nobody removes the owner.\n" +
			"Every member's engine enforces the roles, so a member's commit that breaks them is refused by all.",
		Subcommands: []*ucli.Command{
			roomAdminsAddCommand(),
			roomAdminsRemoveCommand(),
		},
	}
}

// roomAdminsAddCommand is `tally room admins add`.
func roomAdminsAddCommand() *ucli.Command {
	return &ucli.Command{
		Name: "add", Usage: "make a member an admin", ArgsUsage: "NAME MEMBER",
		Action: roomAction(2, "tally room admins add NAME MEMBER", runRoomAdminsAdd),
	}
}

// runRoomAdminsAdd runs `tally room admins add`.
func runRoomAdminsAdd(e *env, s *seat.Seat, ch string, args []string) error {
	did, _, err := resolveMember(e, s, ch, args[0])
	if err != nil {
		return err
	}
	if err := s.Room(ch).AddAdmin(e.c.Context, did); err != nil {
		return adminsError(err, ch)
	}
	e.out(map[string]any{"room": ch, "admin": did, "added": true}, "%s is now an admin of %s", displayID(e, did), shortRoom(e, s, ch))
	return nil
}

// roomAdminsRemoveCommand is `tally room admins remove`.
func roomAdminsRemoveCommand() *ucli.Command {
	return &ucli.Command{
		Name: "remove", Usage: "make an admin a plain member again", ArgsUsage: "NAME MEMBER",
		Action: roomAction(2, "tally room admins remove NAME MEMBER", runRoomAdminsRemove),
	}
}

// runRoomAdminsRemove runs `tally room admins remove`.
func runRoomAdminsRemove(e *env, s *seat.Seat, ch string, args []string) error {
	did, _, err := resolveMember(e, s, ch, args[0])
	if err != nil {
		return err
	}
	if err := s.Room(ch).RemoveAdmin(e.c.Context, did); err != nil {
		return adminsError(err, ch)
	}
	e.out(map[string]any{"room": ch, "admin": did, "added": false}, "%s is no longer an admin of %s", displayID(e, did), shortRoom(e, s, ch))
	return nil
}

// resolveMember finds the member of ch that arg names: a whole member
// identity, a person's did:key, or the short form room members shows. It
// returns the person and, when the person has one leaf in the room, that
// leaf's identity.
func resolveMember(e *env, s *seat.Seat, ch, arg string) (person, identity string, err error) {
	if strings.HasPrefix(arg, "did:") && !strings.Contains(arg, "#") {
		person = arg
	}
	roster, err := s.Room(ch).Members(e.c.Context)
	if err != nil {
		return "", "", err
	}
	mem := roster.Members
	var leaves []string
	people := map[string]bool{}
	for _, m := range mem {
		if m.Identity == arg {
			return m.Person, m.Identity, nil
		}
		if isShortIDOf(arg, m.Identity) {
			leaves = append(leaves, m.Identity)
			people[m.Person] = true
		}
	}
	name := shortRoom(e, s, ch)
	switch {
	case len(people) > 1:
		return "", "", &usageError{fmt.Sprintf("%q names more than one member of %s", arg, name), "give the whole DID: `tally room members " + name + " --verbose`"}
	case len(leaves) == 0 && person != "":
		return person, person, nil // not in the roster: let the seat say why
	case len(leaves) == 0:
		return "", "", &usageError{fmt.Sprintf("%q is not a member of %s", arg, name), "see `tally room members " + name + "`"}
	case len(leaves) > 1:
		return seat.PersonOf(leaves[0]), "", nil
	}
	return seat.PersonOf(leaves[0]), leaves[0], nil
}

// adminsError explains a failed change of admins.
func adminsError(err error, ch string) error {
	if errors.Is(err, seat.ErrNotDIDKey) {
		return badUsage("not a member identity (a did:key)", "see `tally room members "+ch+"`")
	}
	return err
}
