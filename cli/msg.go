package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/seat"
)

// maxMessageBytes caps a message read from stdin: the relay carries at
// most 1 MB per entry, and the encryption and padding take their share.
const maxMessageBytes = 512 << 10

// msgCommand is `tally msg`.
func msgCommand() *ucli.Command {
	return &ucli.Command{
		Name: "msg", Usage: "send a message to a room (TEXT - reads it from stdin; after -- every word is text)", ArgsUsage: "NAME TEXT…|-",
		Action: roomAction(-2, "tally msg NAME TEXT… (or - to read the message from stdin)", runMsg),
	}
}

// runMsg runs `tally msg`.
func runMsg(e *env, s *seat.Seat, ch string, args []string) error {
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
	seq, err := s.Room(ch).Send(e.c.Context, text)
	if err != nil {
		return err
	}
	e.out(map[string]any{"room": ch, "seq": seq}, "sent to %s", shortRoom(e, s, ch))
	return nil
}

// historyCommand is `tally history`.
func historyCommand() *ucli.Command {
	return &ucli.Command{
		Name: "history", Usage: "print a room's messages (after fetching new ones)", ArgsUsage: "NAME",
		Action: roomAction(1, "tally history NAME", runHistory),
	}
}

// runHistory runs `tally history`.
func runHistory(e *env, s *seat.Seat, ch string, _ []string) error {
	if _, err := s.Room(ch).Sync(e.c.Context); err != nil {
		if errors.Is(err, seat.ErrNoRoom) || errors.Is(err, context.Canceled) || errors.Is(err, seat.ErrRevoked) {
			return err
		}
		showf(e.c.App.ErrWriter, "could not fetch new messages (%v); showing what this home has\n", e.hintOrErr(err))
	}
	msgs, err := s.Room(ch).History(e.c.Context)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		printMessage(e, s, m, true)
	}
	return nil
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
