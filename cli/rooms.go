package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
)

// maxMessageBytes caps a message read from stdin: the relay carries at
// most 1 MB per entry, and the encryption and padding take their share.
const maxMessageBytes = 512 << 10

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
					Name: "list", Usage: "list this home's rooms (--pending: the rooms someone added you to, not joined yet)",
					Flags: []ucli.Flag{&ucli.BoolFlag{Name: "pending", Usage: "list the Welcomes waiting in your inbox instead, without joining them"}},
					Action: withSeat(func(e *env, s *seat.Seat) error {
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
					}),
				},
				{
					Name: "create", Usage: "create a room you own", ArgsUsage: "NAME",
					Description: "New rooms are post-quantum (--suite pq, the default): X-Wing (ML-KEM-768 with X25519) protects\n" +
						"their keys against someone who records the traffic now and has a quantum computer later.\n" +
						"Its commits cost up to about twice as much as --suite classic (X25519 alone). A room keeps its suite.",
					Flags: []ucli.Flag{&ucli.StringFlag{Name: "suite", Usage: "pq or classic", Value: "pq"}},
					Action: roomAction(1, "tally room create NAME [--suite pq|classic]", func(e *env, s *seat.Seat, ch string, _ []string) error {
						suite, err := seat.ParseSuite(e.c.String("suite"))
						if err != nil {
							return badUsage(err.Error(), "for example --suite pq")
						}
						if _, err := s.RoomCreateWith(e.c.Context, ch, seat.RoomOptions{Suite: suite}); err != nil {
							return err
						}
						e.out(map[string]string{"room": ch, "suite": seat.SuiteName(suite)}, "created %s (%s)\ninvite someone: tally room invite %s",
							shortRoom(e, s, ch), seat.SuiteName(suite), shortRoom(e, s, ch))
						return nil
					}),
				},
				{
					Name: "invite", Usage: "mint an invite token (prints it)", ArgsUsage: "NAME",
					Flags: []ucli.Flag{
						usesFlag("seats may join with it"), ttlFlag(),
						&ucli.BoolFlag{Name: "auto", Usage: "the invitee joins at once, with nobody online to admit it"},
					},
					Action: roomAction(1, "tally room invite NAME [--uses N] [--ttl DUR] [--auto]", func(e *env, s *seat.Seat, ch string, _ []string) error {
						uses, ttl, err := e.usesTTL()
						if err != nil {
							return err
						}
						invite := s.RoomInvite
						if e.c.Bool("auto") {
							invite = s.RoomInviteAuto
						}
						tok, err := invite(e.c.Context, ch, uses, ttl)
						if err != nil {
							return err
						}
						if e.json {
							e.out(map[string]string{"room": ch, "token": tok}, "")
							return nil
						}
						// The token alone on stdout, so TOKEN=$(tally room invite NAME) works.
						showf(e.c.App.Writer, "%s\n", tok)
						if e.c.Bool("auto") {
							showf(e.c.App.ErrWriter, "the invitee runs: tally room join %s %s\nand is in the room at once\n", ch, tok)
							return nil
						}
						showf(e.c.App.ErrWriter, "the invitee runs: tally room join %s %s\nthen you run: tally room admit %s\n", ch, tok, shortRoom(e, s, ch))
						return nil
					}),
				},
				{
					Name: "join", Usage: "join with an invite token (waits for the owner to admit you, unless the invite admits on its own)", ArgsUsage: "NAME TOKEN",
					Flags: []ucli.Flag{&ucli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "how long to wait for the owner"}},
					Action: roomAction(2, "tally room join NAME TOKEN", func(e *env, s *seat.Seat, ch string, args []string) error {
						// The wait begins once the directory has taken the join
						// request: the seat then polls for the owner's Welcome. A bad
						// token or name fails before that, without a word of waiting.
						errw := e.c.App.ErrWriter
						st := newStatus(errw)
						var waiting sync.Once
						start := time.Now()
						// Another tally on this home may finish the same join
						// first and take the Welcome: this one then stops waiting.
						had := hasRoom(e, s, ch)
						jctx, stopJoin := context.WithCancel(e.c.Context)
						defer stopJoin()
						var beaten atomic.Bool
						e.hooks.onReq = func(r *http.Request) {
							if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/v1/channels/welcome/") {
								return
							}
							if !had && hasRoom(e, s, ch) {
								beaten.Store(true)
								stopJoin()
								return
							}
							if e.json {
								return
							}
							waiting.Do(func() {
								showf(errw, "asked to join %s; waiting for the owner to admit this seat (they run: tally room admit %s); Ctrl-C stops waiting\n", ch, ch)
							})
							if st.tty {
								st.update("waited %s of at most %s", time.Since(start).Round(time.Second), e.c.Duration("wait"))
							}
						}
						_, err := s.RoomJoin(jctx, ch, args[0], e.c.Duration("wait"))
						e.hooks.onReq = nil
						st.clear()
						// A join that lost the race finds the room saved by the
						// other, or the Welcome gone.
						if err != nil && !had && (beaten.Load() || hasRoom(e, s, ch)) {
							return &usageError{"another tally on this home joined " + ch + " while this one waited",
								"nothing more to do: the room is in this home (`tally room list`)"}
						}
						switch {
						case errors.Is(err, seat.ErrWelcomeWait):
							return notAllowed("not admitted yet to "+ch,
								fmt.Sprintf("ask the owner to run `tally room admit %s`, then run `tally room join %s %s` again", ch, ch, args[0]))
						case errors.Is(err, context.Canceled):
							if !e.json {
								fmt.Fprintf(errw, "stopped waiting; run the same command again to keep waiting\n")
							}
							return err
						case err != nil:
							return err
						}
						e.out(map[string]string{"room": ch}, "joined %s", shortRoom(e, s, ch))
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
								showf(e.c.App.Writer, "no pending join requests for %s\n", shortRoom(e, s, ch))
							}
							for _, a := range adm {
								showf(e.c.App.Writer, "admitted %s to %s\n", displayID(e, a.Identity), shortRoom(e, s, ch))
							}
							return nil
						}
						if !e.json {
							showf(e.c.App.ErrWriter, "admitting join requests for %s every %s; Ctrl-C stops\n", shortRoom(e, s, ch), admitInterval)
						}
						for {
							adm, err := s.RoomAdmit(ctx, ch)
							if ctx.Err() != nil {
								return nil
							}
							var ue *usageError
							if err != nil && !errors.As(roomError(err, ch), &ue) && !errors.Is(err, seat.ErrNotSignedIn) {
								// A network or server hiccup: keep the loop going.
								showf(e.c.App.ErrWriter, "admit failed (%v); trying again\n", e.hintOrErr(err))
							} else if err != nil {
								return err
							}
							for _, a := range adm {
								e.out(map[string]string{"room": ch, "identity": a.Identity, "request_id": a.RequestID}, "admitted %s to %s", displayID(e, a.Identity), shortRoom(e, s, ch))
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
					}),
				},
				{
					Name: "leave", Usage: "leave a room: propose your removal, and forget the room on this home", ArgsUsage: "NAME",
					Action: roomAction(1, "tally room leave NAME", func(e *env, s *seat.Seat, ch string, _ []string) error {
						if err := s.RoomLeave(e.c.Context, ch); err != nil {
							return err
						}
						e.out(map[string]any{"room": ch, "left": true},
							"left %s: your removal is proposed (the next admin, or member who sends, commits it), this account is no longer a member of its channel, and this home forgot it", shortRoom(e, s, ch))
						return nil
					}),
				},
				{
					Name: "decline", Usage: "decline a room someone added you to (see `tally room list --pending`); the adder is told nothing", ArgsUsage: "NAME",
					Action: withSeat(func(e *env, s *seat.Seat) error {
						if len(e.args) != 1 {
							return badUsage("wrong arguments", "usage: tally room decline NAME")
						}
						ch, err := pendingChannel(e, s, e.args[0])
						if err != nil {
							return err
						}
						n, err := s.RoomDecline(e.c.Context, ch)
						if errors.Is(err, seat.ErrNotPending) {
							return notFound("no Welcome to "+ch+" waits for you", "see `tally room list --pending`")
						}
						if err != nil {
							return err
						}
						e.out(map[string]any{"room": ch, "declined": n}, "declined %s: you will not join it", ch)
						return nil
					}),
				},
				{
					Name: "add", Usage: "add a person, even one who is offline, from the join offers their devices left (owner or admin)", ArgsUsage: "NAME WHO",
					Description: "WHO is the person's account id or did:key (`tally whoami` shows both), or an add-token\n" +
						"they gave you (`tally contact token`). You may add a person who shares a room or an org with\n" +
						"you; anyone else only with their add-token (WHO, or --token with their id).",
					Flags: []ucli.Flag{&ucli.StringFlag{Name: "token", Usage: "the person's add-token (skt_add_…), if you share no room or org with them"}},
					Action: roomAction(2, "tally room add NAME WHO", func(e *env, s *seat.Seat, ch string, args []string) error {
						who := args[0]
						var added []seat.Added
						var err error
						if strings.HasPrefix(who, "skt_add_") {
							added, err = s.RoomAdd(e.c.Context, ch, who)
							who = "the token's maker"
						} else {
							added, err = s.RoomAddWith(e.c.Context, ch, who, e.c.String("token"))
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
					}),
				},
				{
					Name: "admins", Usage: "name or unname the room's admins (owner only)",
					Description: "Admins may add and remove members, like the owner; nobody removes the owner.\n" +
						"Every member's engine enforces the roles, so a member's commit that breaks them is refused by all.",
					Subcommands: []*ucli.Command{
						{
							Name: "add", Usage: "make a member an admin", ArgsUsage: "NAME MEMBER",
							Action: roomAction(2, "tally room admins add NAME MEMBER", func(e *env, s *seat.Seat, ch string, args []string) error {
								did, _, err := resolveMember(e, s, ch, args[0])
								if err != nil {
									return err
								}
								if err := s.RoomAdminAdd(e.c.Context, ch, did); err != nil {
									return adminsError(err, ch)
								}
								e.out(map[string]any{"room": ch, "admin": did, "added": true}, "%s is now an admin of %s", displayID(e, did), shortRoom(e, s, ch))
								return nil
							}),
						},
						{
							Name: "remove", Usage: "make an admin a plain member again", ArgsUsage: "NAME MEMBER",
							Action: roomAction(2, "tally room admins remove NAME MEMBER", func(e *env, s *seat.Seat, ch string, args []string) error {
								did, _, err := resolveMember(e, s, ch, args[0])
								if err != nil {
									return err
								}
								if err := s.RoomAdminRemove(e.c.Context, ch, did); err != nil {
									return adminsError(err, ch)
								}
								e.out(map[string]any{"room": ch, "admin": did, "added": false}, "%s is no longer an admin of %s", displayID(e, did), shortRoom(e, s, ch))
								return nil
							}),
						},
					},
				},
				{
					Name: "remove", Usage: "remove a member (a commit; they cannot read further messages)", ArgsUsage: "NAME MEMBER",
					Action: roomAction(2, "tally room remove NAME MEMBER", func(e *env, s *seat.Seat, ch string, args []string) error {
						_, did, err := resolveMember(e, s, ch, args[0])
						if err != nil {
							return err
						}
						if did == "" {
							return &usageError{fmt.Sprintf("%s has more than one device in %s", args[0], shortRoom(e, s, ch)),
								"name the device's whole identity (`tally room members " + shortRoom(e, s, ch) + " --verbose`)"}
						}
						rm, err := s.RoomRemoveMember(e.c.Context, ch, did)
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
					}),
				},
			},
		},
		{
			Name: "msg", Usage: "send a message to a room (TEXT - reads it from stdin; after -- every word is text)", ArgsUsage: "NAME TEXT…|-",
			Action: roomAction(-2, "tally msg NAME TEXT… (or - to read the message from stdin)", func(e *env, s *seat.Seat, ch string, args []string) error {
				text := strings.Join(args, " ")
				if len(args) == 1 && args[0] == "-" && e.literal == len(e.args) {
					b, err := io.ReadAll(io.LimitReader(e.c.App.Reader, maxMessageBytes+1))
					if err != nil {
						return err
					}
					if len(b) > maxMessageBytes {
						return &usageError{fmt.Sprintf("the message on stdin is over %d bytes", maxMessageBytes), "send a shorter one"}
					}
					text = strings.TrimSuffix(string(b), "\n")
					if strings.TrimSpace(text) == "" {
						return badUsage("no message on stdin", "echo TEXT | tally msg NAME -")
					}
				}
				if strings.TrimSpace(text) == "" {
					return badUsage("the message is empty", "tally msg NAME TEXT…")
				}
				seq, err := s.RoomSend(e.c.Context, ch, text)
				if err != nil {
					return err
				}
				e.out(map[string]any{"room": ch, "seq": seq}, "sent to %s", shortRoom(e, s, ch))
				return nil
			}),
		},
		{
			Name: "history", Usage: "print a room's messages (after fetching new ones)", ArgsUsage: "NAME",
			Action: roomAction(1, "tally history NAME", func(e *env, s *seat.Seat, ch string, _ []string) error {
				if _, err := s.RoomSync(e.c.Context, ch); err != nil {
					if errors.Is(err, seat.ErrNoRoom) || errors.Is(err, context.Canceled) || errors.Is(err, seat.ErrRevoked) {
						return err
					}
					showf(e.c.App.ErrWriter, "could not fetch new messages (%v); showing what this home has\n", e.hintOrErr(err))
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
				names := e.args
				for i, n := range names {
					ch, err := s.RoomChannel(ctx, n)
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
			}),
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
		ch, err := s.RoomChannel(e.c.Context, args[0])
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

// senderName is how a message's sender is shown: "you" for this person,
// else as room members shows the person.
func senderName(e *env, s *seat.Seat, m seat.RoomMessage) string {
	if me, err := s.Identity(); err == nil && me == seat.PersonOf(m.Sender) {
		return "you"
	}
	return personLabel(e, m.Sender, m.SenderName)
}

// resolveMember finds the member of ch that arg names: a whole member
// identity, a person's did:key, or the short form room members shows. It
// returns the person and, when the person has one leaf in the room, that
// leaf's identity.
func resolveMember(e *env, s *seat.Seat, ch, arg string) (person, identity string, err error) {
	if strings.HasPrefix(arg, "did:") && !strings.Contains(arg, "#") {
		person = arg
	}
	mem, _, err := s.RoomMembers(e.c.Context, ch)
	if err != nil {
		return "", "", err
	}
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

// printMessage prints `[room] sender: text` (notices in words), with the
// time for history, or one JSON object per message (the exact text). The
// sender wrote the text, and may have written escapes or lines made to
// look like other messages: it is shown rendered, each line after its
// first indented under this header.
func printMessage(e *env, s *seat.Seat, m seat.RoomMessage, withTime bool) {
	if e.json {
		v := map[string]any{"room": m.Room, "seq": m.Seq, "sender": m.Sender, "sender_short": shortID(m.Sender), "text": m.Text, "time": m.Time.UTC()}
		if m.SenderName != "" {
			v["sender_name"] = m.SenderName
		}
		if m.Kind != "" {
			v["kind"] = m.Kind
		}
		if m.Role != "" {
			v["role"] = m.Role
		}
		e.out(v, "")
		return
	}
	room, who := termtext.Line(shortRoom(e, s, m.Room)), termtext.Line(senderName(e, s, m))
	text := termtext.Block(m.Text, continuation)
	var line string
	switch m.Kind {
	case "":
		line = fmt.Sprintf("[%s] %s: %s", room, who, text)
	case seat.NoticeName:
		name := termtext.Line(m.Text)
		line = fmt.Sprintf("[%s] %s now goes by the name \"%s\"", room, termtext.Line(displayID(e, m.Sender)), name)
		if who == "you" {
			line = fmt.Sprintf("[%s] you now go by the name \"%s\"", room, name)
		}
	case seat.NoticeRemoved:
		line = fmt.Sprintf("[%s] %s removed you from the room; nothing sent there after reaches you", room, who)
	case seat.NoticeGap, seat.NoticeRejoined:
		line = fmt.Sprintf("[%s] %s", room, text)
	case seat.NoticeJoined, seat.NoticeLeft:
		verb := map[string]string{seat.NoticeJoined: "joined", seat.NoticeLeft: "left"}[m.Kind]
		line = fmt.Sprintf("[%s] %s %s", room, termtext.Line(subjectName(e, s, m)), verb)
	case seat.NoticeAdded, seat.NoticeRemovedMember:
		verb := map[string]string{seat.NoticeAdded: "added", seat.NoticeRemovedMember: "removed"}[m.Kind]
		line = fmt.Sprintf("[%s] %s %s %s", room, who, verb, termtext.Line(subjectName(e, s, m)))
	case seat.NoticeRole:
		line = fmt.Sprintf("[%s] %s made %s %s", room, who, termtext.Line(subjectName(e, s, m)), termtext.Line(article(m.Role)))
	default:
		line = fmt.Sprintf("[%s] (%s) %s: %s", room, termtext.Line(m.Kind), who, text)
	}
	if withTime {
		line = m.Time.Local().Format("2006-01-02 15:04:05") + " " + line
	}
	fmt.Fprintln(e.c.App.Writer, line)
}

// subjectName is how a notice names the person it is about (m.Text):
// "you" for this seat's person, else as members are shown.
func subjectName(e *env, s *seat.Seat, m seat.RoomMessage) string {
	return senderName(e, s, seat.RoomMessage{Room: m.Room, Sender: m.Text})
}

// article is a role with its article: "an admin", "the owner", "a member".
func article(role string) string {
	switch role {
	case seat.RoleAdmin:
		return "an admin"
	case seat.RoleOwner:
		return "the owner"
	}
	return "a " + role
}

// adminsError explains a failed change of admins.
func adminsError(err error, ch string) error {
	if errors.Is(err, seat.ErrNotDIDKey) {
		return badUsage("not a member identity (a did:key)", "see `tally room members "+ch+"`")
	}
	return err
}

// roomSuite is the short name of the room's cipher suite, "" if unknown.
func roomSuite(e *env, s *seat.Seat, ch string) string {
	cs, err := s.RoomSuite(e.c.Context, ch)
	if err != nil {
		return ""
	}
	return seat.SuiteName(cs)
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
