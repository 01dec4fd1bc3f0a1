package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/seat"
)

// connectCommand is `tally connect`.
func connectCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "connect",
		Usage:  "register this seat and its sync channel",
		Action: withSeat(runConnect),
	}
}

// runConnect runs `tally connect`.
func runConnect(e *env, s *seat.Seat) error {
	ch, err := s.Connect(e.c.Context)
	if err != nil {
		return err
	}
	e.out(map[string]string{"channel": ch}, "connected: sync channel %s", ch)
	return nil
}

// addCommand is `tally add`.
func addCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "add",
		Usage:     "append to the local log",
		ArgsUsage: "TEXT…",
		Action:    withSeat(runAdd),
	}
}

// runAdd runs `tally add`.
func runAdd(e *env, s *seat.Seat) error {
	if err := needSeed(s); err != nil {
		return err
	}
	text := strings.Join(e.args, " ")
	if strings.TrimSpace(text) == "" {
		return badUsage("nothing to add", "tally add TEXT…")
	}
	en, err := s.Add(e.c.Context, text)
	if err != nil {
		return err
	}
	e.out(map[string]string{"id": hex.EncodeToString(en.ID[:])}, "added")
	return nil
}

// logCommand is `tally log`.
func logCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "log",
		Usage:  "print the local log",
		Action: withSeat(runLog),
	}
}

// runLog runs `tally log`.
func runLog(e *env, s *seat.Seat) error {
	if err := needSeed(s); err != nil {
		return err
	}
	es, err := s.Log(e.c.Context)
	if err != nil {
		return err
	}
	for _, en := range es {
		if e.json {
			e.out(map[string]any{"id": hex.EncodeToString(en.ID[:]), "created_at": en.CreatedAt, "text": en.Text}, "")
			continue
		}
		// An entry may come from another device of this
		// person's: shown, its lines under its time.
		showf(e.c.App.Writer, "%s  ", en.CreatedAt.Local().Format("2006-01-02 15:04:05"))
		fmt.Fprintln(e.c.App.Writer, termtext.Block(en.Text, continuation))
	}
	return nil
}

// pushCommand is `tally push`.
func pushCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "push",
		Usage:  "seal and publish new log entries",
		Action: withSeat(runPush),
	}
}

// runPush runs `tally push`.
func runPush(e *env, s *seat.Seat) error {
	st := newStatus(e.c.App.ErrWriter)
	n, err := s.PushWith(e.c.Context, func(sent, total int) {
		if !e.json && st.tty {
			st.update("pushed %d of %d batches", sent, total)
		}
	})
	st.clear()
	if err != nil {
		return err
	}
	e.out(map[string]int{"pushed": n}, "pushed %s", plural(n, "entry", "entries"))
	return nil
}

// pullCommand is `tally pull`.
func pullCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "pull",
		Usage:  "fetch and merge log entries from the relay",
		Action: withSeat(runPull),
	}
}

// runPull runs `tally pull`.
func runPull(e *env, s *seat.Seat) error {
	var reached uint64
	st := newStatus(e.c.App.ErrWriter)
	progress := func(seq uint64) {
		reached = seq
		if !e.json {
			st.update("pulled up to seq %d", seq)
		}
	}
	n, err := s.Pull(e.c.Context, progress)
	st.clear()
	if errors.Is(err, context.Canceled) {
		// What was merged stays merged: the next pull goes on from there.
		showf(e.c.App.ErrWriter, "stopped at seq %d with %d new entries merged; run `tally pull` again to go on\n", reached, n)
	}
	if err != nil {
		return err
	}
	e.out(map[string]int{"new": n}, "pulled %s", plural(n, "new entry", "new entries"))
	return nil
}
