package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// roomCreateCommand is `tally room create`.
func roomCreateCommand() *ucli.Command {
	return &ucli.Command{
		Name: "create", Usage: "create a room you own", ArgsUsage: "NAME",
		Description: "New rooms are post-quantum (--suite pq, the default): X-Wing (ML-KEM-768 with X25519) protects\n" +
			"their keys against someone who records the traffic now and has a quantum computer later.\n" +
			"Its commits cost up to about twice as much as --suite classic (X25519 alone). A room keeps its suite.",
		Flags:  []ucli.Flag{&ucli.StringFlag{Name: "suite", Usage: "pq or classic", Value: "pq"}},
		Action: roomAction(1, "tally room create NAME [--suite pq|classic]", runRoomCreate),
	}
}

// runRoomCreate runs `tally room create`.
func runRoomCreate(e *env, s *seat.Seat, ch string, _ []string) error {
	suite, err := seat.ParseSuite(e.c.String("suite"))
	if err != nil {
		return badUsage(err.Error(), "for example --suite pq")
	}
	if _, err := s.Room(ch).Create(e.c.Context, &seat.RoomOptions{Suite: suite}); err != nil {
		return err
	}
	e.out(map[string]string{"room": ch, "suite": seat.SuiteName(suite)}, "created %s (%s)\ninvite someone: tally room invite %s",
		shortRoom(e, s, ch), seat.SuiteName(suite), shortRoom(e, s, ch))
	return nil
}

// roomInviteCommand is `tally room invite`.
func roomInviteCommand() *ucli.Command {
	return &ucli.Command{
		Name: "invite", Usage: "mint an invite token (prints it)", ArgsUsage: "NAME",
		Flags: []ucli.Flag{
			usesFlag("seats may join with it"), ttlFlag(),
			&ucli.BoolFlag{Name: "auto", Usage: "the invitee joins at once, with nobody online to admit it"},
		},
		Action: roomAction(1, "tally room invite NAME [--uses N] [--ttl DUR] [--auto]", runRoomInvite),
	}
}

// runRoomInvite runs `tally room invite`.
func runRoomInvite(e *env, s *seat.Seat, ch string, _ []string) error {
	uses, ttl, err := e.usesTTL()
	if err != nil {
		return err
	}
	tok, err := s.Room(ch).Invite(e.c.Context, &seat.InviteOptions{Uses: uses, TTL: ttl, Auto: e.c.Bool("auto")})
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
}

// roomJoinCommand is `tally room join`.
func roomJoinCommand() *ucli.Command {
	return &ucli.Command{
		Name: "join", Usage: "join with an invite token (waits for the owner to admit you, unless the invite admits on its own)", ArgsUsage: "NAME TOKEN",
		Flags:  []ucli.Flag{&ucli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "how long to wait for the owner"}},
		Action: roomAction(2, "tally room join NAME TOKEN", runRoomJoin),
	}
}

// runRoomJoin runs `tally room join`.
func runRoomJoin(e *env, s *seat.Seat, ch string, args []string) error {
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
	_, err := s.Room(ch).Join(jctx, args[0], &seat.JoinOptions{Wait: e.c.Duration("wait")})
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
}

// admitInterval is how often `room admit --watch` looks for join requests.
var admitInterval = 2 * time.Second

// roomAdmitCommand is `tally room admit`.
func roomAdmitCommand() *ucli.Command {
	return &ucli.Command{
		Name: "admit", Usage: "admit every pending join request (--watch keeps admitting)", ArgsUsage: "NAME",
		Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "watch", Usage: "keep admitting until interrupted"}},
		Action: roomAction(1, "tally room admit NAME [--watch]", runRoomAdmit),
	}
}

// runRoomAdmit runs `tally room admit`: once, or with --watch until
// interrupted.
func runRoomAdmit(e *env, s *seat.Seat, ch string, _ []string) error {
	if e.c.Bool("watch") {
		return admitWatch(e, s, ch)
	}
	adm, err := s.Room(ch).Admit(e.c.Context)
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

// admitWatch is `tally room admit --watch`: it admits the join requests
// of ch every admitInterval, printing one line (one JSON object) per
// admission, until ctx ends. A network or server hiccup is said and
// the loop goes on; a refusal ends it.
func admitWatch(e *env, s *seat.Seat, ch string) error {
	ctx := e.c.Context
	if !e.json {
		showf(e.c.App.ErrWriter, "admitting join requests for %s every %s; Ctrl-C stops\n", shortRoom(e, s, ch), admitInterval)
	}
	for {
		adm, err := s.Room(ch).Admit(ctx)
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
}
