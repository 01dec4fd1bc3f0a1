package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
)

// admitInterval is how often `room admit --watch` looks for join requests.
var admitInterval = 2 * time.Second

func roomCommands() []*ucli.Command {
	return []*ucli.Command{
		{
			Name:  "room",
			Usage: "create, join and manage rooms (MLS groups on relay channels)",
			Description: "A room NAME is a channel name org/ns/svc; a bare name means <your org>/rooms/name.\n" +
				"Members in other orgs use the full name the owner's invite prints.",
			Subcommands: []*ucli.Command{
				{
					Name: "create", Usage: "create a room you own", ArgsUsage: "NAME",
					Action: roomAction(1, "tally room create NAME", func(e *env, s *seat.Seat, ch string, _ []string) error {
						if _, err := s.RoomCreate(e.c.Context, ch); err != nil {
							return err
						}
						e.out(map[string]string{"room": ch}, "created %s\ninvite someone: tally room invite %s", ch, shortRoom(e, s, ch))
						return nil
					}),
				},
				{
					Name: "invite", Usage: "mint an invite token (prints it)", ArgsUsage: "NAME",
					Flags: []ucli.Flag{
						&ucli.IntFlag{Name: "uses", Usage: "how many seats may join with it (default 1)"},
						&ucli.DurationFlag{Name: "ttl", Usage: "how long it is valid (default 1h)"},
					},
					Action: roomAction(1, "tally room invite NAME [--uses N] [--ttl D]", func(e *env, s *seat.Seat, ch string, _ []string) error {
						uses, ttl := e.c.Int("uses"), e.c.Duration("ttl")
						if uses < 0 || ttl < 0 || (ttl > 0 && ttl < time.Second) {
							return &usageError{"--uses and --ttl must be positive", "for example --uses 3 --ttl 24h"}
						}
						tok, err := s.RoomInvite(e.c.Context, ch, uses, ttl)
						if err != nil {
							return err
						}
						if e.json {
							e.out(map[string]string{"room": ch, "token": tok}, "")
							return nil
						}
						// The token alone on stdout, so TOKEN=$(tally room invite NAME) works.
						fmt.Fprintln(e.c.App.Writer, tok)
						fmt.Fprintf(e.c.App.ErrWriter, "the invitee runs: tally room join %s %s\nthen you run: tally room admit %s\n", ch, tok, shortRoom(e, s, ch))
						return nil
					}),
				},
				{
					Name: "join", Usage: "join with an invite token (waits for the owner to admit you)", ArgsUsage: "NAME TOKEN",
					Flags: []ucli.Flag{&ucli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "how long to wait for the owner"}},
					Action: roomAction(2, "tally room join NAME TOKEN", func(e *env, s *seat.Seat, ch string, args []string) error {
						if !e.json {
							fmt.Fprintf(e.c.App.ErrWriter, "waiting for the owner to admit this seat (they run: tally room admit %s); Ctrl-C stops waiting\n", ch)
						}
						_, err := s.RoomJoin(e.c.Context, ch, args[0], e.c.Duration("wait"))
						switch {
						case errors.Is(err, seat.ErrWelcomeWait):
							return &usageError{"not admitted yet to " + ch,
								fmt.Sprintf("ask the owner to run `tally room admit %s`, then run `tally room join %s %s` again", ch, ch, args[0])}
						case errors.Is(err, context.Canceled):
							if !e.json {
								fmt.Fprintf(e.c.App.ErrWriter, "stopped waiting; run the same command again to keep waiting\n")
							}
							return err
						case err != nil:
							return err
						}
						e.out(map[string]string{"room": ch}, "joined %s", ch)
						return nil
					}),
				},
				{
					Name: "admit", Usage: "admit every pending join request (--watch keeps admitting)", ArgsUsage: "NAME",
					Flags: []ucli.Flag{&ucli.BoolFlag{Name: "watch", Usage: "keep admitting until interrupted"}},
					Action: roomAction(1, "tally room admit NAME [--watch]", func(e *env, s *seat.Seat, ch string, _ []string) error {
						ctx := e.c.Context
						if !e.c.Bool("watch") {
							adm, err := s.RoomAdmit(ctx, ch)
							if err != nil {
								return err
							}
							if e.json {
								list := []map[string]string{}
								for _, a := range adm {
									list = append(list, map[string]string{"identity": a.Identity, "request_id": a.RequestID})
								}
								e.out(map[string]any{"room": ch, "admitted": list}, "")
								return nil
							}
							if len(adm) == 0 {
								fmt.Fprintf(e.c.App.Writer, "no pending join requests for %s\n", ch)
							}
							for _, a := range adm {
								fmt.Fprintf(e.c.App.Writer, "admitted %s\n", a.Identity)
							}
							return nil
						}
						if !e.json {
							fmt.Fprintf(e.c.App.ErrWriter, "admitting join requests for %s every %s; Ctrl-C stops\n", ch, admitInterval)
						}
						for {
							adm, err := s.RoomAdmit(ctx, ch)
							if ctx.Err() != nil {
								return nil
							}
							var ue *usageError
							if err != nil && !errors.As(roomError(err, ch), &ue) && !errors.Is(err, seat.ErrNotSignedIn) {
								// A network or server hiccup: keep the loop going.
								fmt.Fprintf(e.c.App.ErrWriter, "admit failed (%v); trying again\n", err)
							} else if err != nil {
								return err
							}
							for _, a := range adm {
								e.out(map[string]string{"room": ch, "identity": a.Identity, "request_id": a.RequestID}, "admitted %s", a.Identity)
							}
							select {
							case <-ctx.Done():
								return nil
							case <-time.After(admitInterval):
							}
						}
					}),
				},
				{
					Name: "members", Usage: "list a room's members", ArgsUsage: "NAME",
					Action: roomAction(1, "tally room members NAME", func(e *env, s *seat.Seat, ch string, _ []string) error {
						mem, epoch, err := s.RoomMembers(e.c.Context, ch)
						if err != nil {
							return err
						}
						if e.json {
							list := []map[string]any{}
							for _, m := range mem {
								list = append(list, map[string]any{"identity": m.Identity, "leaf": m.Leaf, "self": m.Self, "role": m.Role})
							}
							e.out(map[string]any{"room": ch, "epoch": epoch, "members": list}, "")
							return nil
						}
						plural := "s"
						if len(mem) == 1 {
							plural = ""
						}
						fmt.Fprintf(e.c.App.Writer, "%s: %d member%s, epoch %d\n", ch, len(mem), plural, epoch)
						for _, m := range mem {
							you := ""
							if m.Self {
								you = "  (you)"
							}
							role := m.Role
							if role == "" {
								role = "-" // a room from before roles
							}
							fmt.Fprintf(e.c.App.Writer, "  %-6s %s%s\n", role, m.Identity, you)
						}
						return nil
					}),
				},
				{
					Name: "leave", Usage: "forget a room on this home", ArgsUsage: "NAME",
					Action: roomAction(1, "tally room leave NAME", func(e *env, s *seat.Seat, ch string, _ []string) error {
						if err := s.RoomLeave(e.c.Context, ch); err != nil {
							return err
						}
						did, _ := s.Identity()
						e.out(map[string]any{"room": ch, "left": true},
							"left %s: this account is no longer a member of its channel and this home forgot it; the owner removes your seat from the group with `tally room remove %s %s`", ch, ch, did)
						return nil
					}),
				},
				{
					Name: "admins", Usage: "name or unname the room's admins (owner only)",
					Description: "Admins may add and remove members, like the owner; nobody removes the owner.\n" +
						"Every member's engine enforces the roles, so a member's commit that breaks them is refused by all.",
					Subcommands: []*ucli.Command{
						{
							Name: "add", Usage: "make a member an admin", ArgsUsage: "NAME DID",
							Action: roomAction(2, "tally room admins add NAME DID", func(e *env, s *seat.Seat, ch string, args []string) error {
								if err := s.RoomAdminAdd(e.c.Context, ch, args[0]); err != nil {
									return adminsError(err, ch)
								}
								e.out(map[string]any{"room": ch, "admin": args[0], "added": true}, "%s is now an admin of %s", args[0], ch)
								return nil
							}),
						},
						{
							Name: "remove", Usage: "make an admin a plain member again", ArgsUsage: "NAME DID",
							Action: roomAction(2, "tally room admins remove NAME DID", func(e *env, s *seat.Seat, ch string, args []string) error {
								if err := s.RoomAdminRemove(e.c.Context, ch, args[0]); err != nil {
									return adminsError(err, ch)
								}
								e.out(map[string]any{"room": ch, "admin": args[0], "added": false}, "%s is no longer an admin of %s", args[0], ch)
								return nil
							}),
						},
					},
				},
				{
					Name: "remove", Usage: "remove a member (a commit; they cannot read further messages)", ArgsUsage: "NAME DID",
					Action: roomAction(2, "tally room remove NAME DID", func(e *env, s *seat.Seat, ch string, args []string) error {
						did := args[0]
						if !strings.HasPrefix(did, "did:key:") {
							return &usageError{fmt.Sprintf("%q is not a member identity", did), "see `tally room members " + ch + "`"}
						}
						rm, err := s.RoomRemoveMember(e.c.Context, ch, did)
						if err != nil {
							return err
						}
						note := "its account no longer reaches the room at the relay"
						switch {
						case rm.OtherSeats:
							note = "its account keeps its membership of the channel: other seats of that account are still in the room"
						case rm.AccountID == "":
							note = "this home did not learn its account when admitting it, so the account's membership of the channel is unchanged (the commit alone keeps it from new messages)"
						}
						e.out(map[string]any{"room": ch, "removed": did, "account_id": rm.AccountID, "membership_ended": rm.MembershipEnded},
							"removed %s from %s; %s", did, ch, note)
						return nil
					}),
				},
			},
		},
		{
			Name: "msg", Usage: "send a message to a room", ArgsUsage: "NAME TEXT…",
			Action: roomAction(-2, "tally msg NAME TEXT…", func(e *env, s *seat.Seat, ch string, args []string) error {
				text := strings.Join(args, " ")
				seq, err := s.RoomSend(e.c.Context, ch, text)
				if err != nil {
					return err
				}
				e.out(map[string]any{"room": ch, "seq": seq}, "sent to %s", ch)
				return nil
			}),
		},
		{
			Name: "history", Usage: "print a room's messages (after fetching new ones)", ArgsUsage: "NAME",
			Action: roomAction(1, "tally history NAME", func(e *env, s *seat.Seat, ch string, _ []string) error {
				if _, err := s.RoomSync(e.c.Context, ch); err != nil {
					if errors.Is(err, seat.ErrNoRoom) || errors.Is(err, context.Canceled) {
						return err
					}
					fmt.Fprintf(e.c.App.ErrWriter, "could not fetch new messages (%v); showing what this home has\n", err)
				}
				msgs, err := s.RoomHistory(e.c.Context, ch)
				if err != nil {
					return err
				}
				for _, m := range msgs {
					printMessage(e, s, m, true)
				}
				return nil
			}),
		},
		{
			Name: "watch", Usage: "print rooms' messages as they arrive (all rooms without a NAME)", ArgsUsage: "[NAME…]",
			Action: withSeat(func(e *env, s *seat.Seat) error {
				ctx := e.c.Context
				names := e.c.Args().Slice()
				for i, n := range names {
					ch, err := s.RoomChannel(ctx, n)
					if err != nil {
						return err
					}
					names[i] = ch
				}
				err := s.WatchWith(ctx, names, seat.WatchOptions{
					OnMessage: func(m seat.RoomMessage) { printMessage(e, s, m, false) },
					OnEvent: func(ev seat.WatchEvent) {
						// Status goes to stderr, also with --json.
						if ev.Connected {
							fmt.Fprintf(e.c.App.ErrWriter, "watching %s; Ctrl-C stops\n", watchedList(e, s, names))
						} else {
							fmt.Fprintf(e.c.App.ErrWriter, "not connected (%v); trying again in %s\n", ev.Err, ev.Retry.Round(100*time.Millisecond))
						}
					},
				})
				if len(names) == 1 {
					return roomError(err, names[0])
				}
				return roomError(err, "")
			}),
		},
	}
}

// roomAction runs f with the room channel resolved from the first
// argument. nargs is the exact argument count, or -n for at least n.
func roomAction(nargs int, usage string, f func(e *env, s *seat.Seat, ch string, rest []string) error) ucli.ActionFunc {
	return withSeat(func(e *env, s *seat.Seat) error {
		args, err := trailingFlags(e.c, e.c.Args().Slice())
		if err != nil {
			return err
		}
		if (nargs >= 0 && len(args) != nargs) || (nargs < 0 && len(args) < -nargs) {
			return &usageError{"wrong arguments", "usage: " + usage}
		}
		ch, err := s.RoomChannel(e.c.Context, args[0])
		if err != nil {
			return err
		}
		return roomError(f(e, s, ch, args[1:]), ch)
	})
}

// trailingFlags sets the command's flags that follow its arguments (the
// fixed syntax puts them there: room invite NAME --uses 3) and returns the
// arguments left. Commands without flags take every argument as is.
func trailingFlags(c *ucli.Context, args []string) ([]string, error) {
	if len(c.Command.Flags) == 0 {
		return args, nil
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f ucli.Flag
		for _, x := range c.Command.Flags {
			for _, n := range x.Names() {
				if n == name {
					f = x
				}
			}
		}
		if f == nil {
			return nil, &usageError{"unknown flag " + a, "see `" + c.Command.HelpName + " --help`"}
		}
		if _, isBool := f.(*ucli.BoolFlag); isBool {
			if !hasVal {
				val = "true"
			}
		} else if !hasVal {
			if i+1 >= len(args) {
				return nil, &usageError{"flag " + a + " needs a value", ""}
			}
			i++
			val = args[i]
		}
		if err := c.Set(name, val); err != nil {
			return nil, &usageError{fmt.Sprintf("bad value %q for %s", val, a), ""}
		}
	}
	return pos, nil
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
			return &usageError{"only the owner of " + ch + " can do that", ""}
		case "invalid_invite":
			return &usageError{"the invite token is invalid, expired or used up", "ask the owner of " + ch + " for a new one (`tally room invite`)"}
		case "wrong_org":
			return &usageError{"rooms you create live under your own org, not " + ch, "use a bare name: `tally room create NAME`"}
		case "channel_not_found":
			return &usageError{"the directory has no room " + ch, "check the name, or create it with `tally room create`"}
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, seat.ErrNoRooms):
		return &usageError{"this home has no rooms", "run `tally room create NAME`, or `tally room join NAME TOKEN` with an invite"}
	case ch == "":
		return err
	case errors.Is(err, seat.ErrNoRoom):
		return &usageError{"not a member of " + ch, "run `tally room join " + ch + " TOKEN` with an invite from its owner, or `tally room create` to make a room"}
	case errors.Is(err, seat.ErrRoomExists):
		return &usageError{"this home already has " + ch, "pick another name, or `tally room leave " + ch + "` first"}
	case errors.Is(err, seat.ErrNotOwner):
		return &usageError{"only the owner of " + ch + " can do that", ""}
	case errors.Is(err, seat.ErrRoomLive):
		return &usageError{"other accounts are still members of " + ch + ", in the group this seat made there: a new room on it would split the room in two",
			"pick another name, or have its members leave first (`tally room leave " + ch + "`)"}
	case errors.Is(err, seat.ErrRemoveOwner):
		return &usageError{"nobody can remove the owner of " + ch, "see `tally room members " + ch + "` for the roles"}
	case errors.Is(err, seat.ErrNotAdmin):
		return &usageError{"only the owner and admins of " + ch + " can remove or add others; nothing was sent",
			"ask the owner to make you an admin (`tally room admins add " + ch + " DID`), or ask an admin; see `tally room members " + ch + "`"}
	case errors.Is(err, seat.ErrNoRoles):
		return &usageError{ch + " was created before rooms had roles, so it has no admins", "create a new room to have roles"}
	case errors.Is(err, mls.ErrRefusedByPolicy):
		return &usageError{"the room's roles do not allow that: " + err.Error(), "see `tally room members " + ch + "`"}
	case errors.Is(err, seat.ErrNotMember):
		return &usageError{"this account is not a member of " + ch + " at the relay: the owner removed it, or has not admitted it yet",
			"ask the owner of " + ch + " for an invite and run `tally room join " + ch + " TOKEN`; `tally room leave " + ch + "` forgets the room"}
	case errors.Is(err, seat.ErrRemovedRoom):
		return &usageError{"this seat was removed from " + ch, "ask the owner for a new invite; `tally room leave " + ch + "` forgets the room"}
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

// shortSender shortens a did:key to its last 8 characters; this seat is
// "you".
func shortSender(s *seat.Seat, did string) string {
	if me, err := s.Identity(); err == nil && me == did {
		return "you"
	}
	if len(did) > 8 {
		return did[len(did)-8:]
	}
	return did
}

// printMessage prints `[room] sender-short: text`, with the time for
// history, or one JSON object per message.
func printMessage(e *env, s *seat.Seat, m seat.RoomMessage, withTime bool) {
	if e.json {
		e.out(map[string]any{"room": m.Room, "seq": m.Seq, "sender": m.Sender, "text": m.Text, "time": m.Time.UTC()}, "")
		return
	}
	line := fmt.Sprintf("[%s] %s: %s", shortRoom(e, s, m.Room), shortSender(s, m.Sender), m.Text)
	if withTime {
		line = m.Time.Local().Format("2006-01-02 15:04:05") + " " + line
	}
	fmt.Fprintln(e.c.App.Writer, line)
}

// adminsError explains a failed change of admins.
func adminsError(err error, ch string) error {
	if errors.Is(err, seat.ErrNotDIDKey) {
		return &usageError{"not a member identity (a did:key)", "see `tally room members " + ch + "`"}
	}
	return err
}
