package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// defaultDeviceLabel is the label of a device grant when --label is not
// given: neutral, where the host name would tell the directory (and
// whoever reads its database) what the machine is called.
const defaultDeviceLabel = "new device"

func recoverFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "recover", Usage: "new device: enter the phrase, then approve the user code on a signed-in device"},
		&ucli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "with --recover: how long to wait for the approval"},
		&ucli.StringFlag{Name: "label", Usage: "with --recover: name of this device shown to the approver; the directory keeps it until the grant is delivered", Value: defaultDeviceLabel},
	}
}

// readPhrase reads the recovery phrase: on a terminal with a prompt and
// the echo off, else the first line of stdin. tally never prints the words.
func readPhrase(e *env) (string, error) {
	in := e.c.App.Reader
	if f, ok := in.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprint(e.c.App.ErrWriter, "recovery phrase (24 words, not shown): ")
			if restore, err := echoOff(f); err == nil {
				defer func() {
					restore()
					fmt.Fprintln(e.c.App.ErrWriter)
				}()
			}
		}
	}
	line, err := bufio.NewReaderSize(io.LimitReader(in, 8192), 8192).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if strings.TrimSpace(line) == "" {
		return "", badUsage("no recovery phrase given", "type the 24 words, or pipe them on stdin")
	}
	return line, nil
}

// signinRecover is `tally signin --recover`: restore the seed from the
// phrase, ask the directory for a device grant, show the user code and
// wait for a signed-in device to approve it.
func signinRecover(e *env, s *seat.Seat) error {
	ctx := e.c.Context
	phrase, err := readPhrase(e)
	if err != nil {
		return err
	}
	did, err := s.Recover(ctx, phrase)
	if err != nil {
		return err
	}
	label := e.c.String("label")
	if label == "" {
		label = defaultDeviceLabel
	}
	g, err := s.RequestDevice(ctx, label)
	if err != nil {
		return err
	}
	e.out(map[string]any{"user_code": g.UserCode, "fingerprint": g.Fingerprint, "device": g.Fingerprint, "expires_at": g.ExpiresAt, "identity": did},
		"user code: %s\ndevice fingerprint: %s", g.UserCode, g.Fingerprint)
	if !e.json {
		showf(e.c.App.ErrWriter, "on a signed-in device run: tally devices approve %s\n(approve only if it shows the fingerprint %s; waiting up to %v, Ctrl-C to stop)\n",
			g.UserCode, g.Fingerprint, e.c.Duration("wait"))
	}
	wctx, cancel := context.WithTimeout(ctx, e.c.Duration("wait"))
	defer cancel()
	res, err := s.WaitDevice(wctx, g)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return &usageError{"not approved within " + e.c.Duration("wait").String(), "run `tally signin --recover` again"}
	case ctx.Err() != nil:
		return &usageError{"stopped before the device was approved", "run `tally signin --recover` again"}
	case errors.Is(err, seat.ErrGrantExpired):
		return &usageError{"the user code expired before it was approved", "run `tally signin --recover` again"}
	case err != nil:
		return err
	}
	next := "run `tally connect`, then `tally pull`"
	if res.Connected {
		next = "sync is set up: run `tally pull`"
	}
	e.out(map[string]any{"account_id": res.AccountID, "org": res.Org, "connected": res.Connected},
		"signed in: org %s (account %s); %s", res.Org, res.AccountID, next)
	return nil
}

// testOnlyTerminal makes devices approve treat its input as a terminal, so
// tests can answer its question.
var testOnlyTerminal bool

func devicesCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "devices",
		Usage: "manage this account's devices",
		Description: "Each device of a person is a member of that person's rooms, shown as the person.\n" +
			"A device approved with `devices approve` offers itself to the approver's rooms; the approver\n" +
			"(or a room's owner or admin) adds it on its next command there, and the new device joins\n" +
			"with `devices join`.",
		Subcommands: []*ucli.Command{
			{
				Name: "list", Usage: "list this person's devices in this home's rooms",
				Action: withSeat(func(e *env, s *seat.Seat) error {
					if len(e.args) != 0 {
						return badUsage("tally devices list takes no arguments", "")
					}
					devs, err := s.Devices(e.c.Context)
					if err != nil {
						return err
					}
					if e.json {
						list := []map[string]any{}
						for _, d := range devs {
							list = append(list, map[string]any{"id": d.ID, "identity": d.Identity, "this": d.This, "rooms": d.Rooms})
						}
						e.out(map[string]any{"devices": list}, "")
						return nil
					}
					if len(devs) == 0 {
						fmt.Fprintln(e.c.App.ErrWriter, "no devices: devices show in rooms, and this home has none (`tally room list`)")
						return nil
					}
					for _, d := range devs {
						this := ""
						if d.This {
							this = "  (this device)"
						}
						rooms := make([]string, len(d.Rooms))
						for i, r := range d.Rooms {
							rooms[i] = shortRoom(e, s, r)
						}
						showf(e.c.App.Writer, "%s  in %s: %s%s\n", d.ID, plural(len(d.Rooms), "room", "rooms"), strings.Join(rooms, ", "), this)
					}
					return nil
				}),
			},
			{
				Name: "revoke", Usage: "remove one of this person's devices from every room of this home", ArgsUsage: "ID",
				Action: withSeat(func(e *env, s *seat.Seat) error {
					if len(e.args) != 1 {
						return badUsage("want the device's ID", "see `tally devices list`")
					}
					rooms, err := s.RevokeDevice(e.c.Context, e.args[0])
					if errors.Is(err, seat.ErrNoDevice) {
						return notFound("no device "+e.args[0]+" of yours in this home's rooms", "see `tally devices list`")
					}
					if err != nil {
						return err
					}
					short := make([]string, len(rooms))
					for i, r := range rooms {
						short[i] = shortRoom(e, s, r)
					}
					e.out(map[string]any{"device": e.args[0], "rooms": rooms},
						"removed device %s from %s: it reads nothing sent there from now on", e.args[0], strings.Join(short, ", "))
					return nil
				}),
			},
			{
				Name: "join", Usage: "join the rooms this device was let into after its approval",
				Action: withSeat(func(e *env, s *seat.Seat) error {
					if len(e.args) != 0 {
						return badUsage("tally devices join takes no arguments", "")
					}
					rooms, err := s.JoinDeviceRooms(e.c.Context)
					if err != nil {
						return err
					}
					if e.json {
						e.out(map[string]any{"joined": append([]string{}, rooms...)}, "")
						return nil
					}
					if len(rooms) == 0 {
						fmt.Fprintln(e.c.App.ErrWriter, "no room has let this device in yet: the approving device adds it on its next command in each room (or in its watch); run this again then")
						return nil
					}
					short := make([]string, len(rooms))
					for i, r := range rooms {
						short[i] = shortRoom(e, s, r)
					}
					showf(e.c.App.Writer, "joined %s\n", strings.Join(short, ", "))
					return nil
				}),
			},
			{
				Name:  "approve",
				Usage: "approve a new device by the user code it shows, once its fingerprint matches",
				Description: "Shows the requesting device's fingerprint and asks whether the new device shows the same;\n" +
					"without a terminal, pass the fingerprint the new device shows with --fingerprint.\n" +
					"A different fingerprint means someone else's device is behind the code: nothing is approved.",
				ArgsUsage: "CODE",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "fingerprint", Usage: "the device fingerprint (`FP`) the new device shows, for scripts and pipes"},
				},
				Action: withSeat(func(e *env, s *seat.Seat) error {
					if len(e.args) != 1 {
						return badUsage("want the user code", "tally devices approve XXXX-XXXX")
					}
					code := e.args[0]
					isNotFound := func(err error) bool {
						var apiErr *seat.APIError
						return errors.As(err, &apiErr) && apiErr.Status == 404
					}
					p, err := s.PendingDevice(e.c.Context, code)
					if isNotFound(err) {
						return notFound("no pending device with that code", "check the code, or start `tally signin --recover` again on the new device")
					}
					if err != nil {
						return err
					}
					shown := e.c.String("fingerprint")
					if shown == "" {
						if !isTerminal(e.c.App.Reader) && !testOnlyTerminal {
							return badUsage("not on a terminal, so the fingerprint cannot be confirmed here",
								"pass the fingerprint the new device shows: tally devices approve --fingerprint \"XXXX XXXX XXXX\" "+code)
						}
						label := p.Label
						if label == "" {
							label = "a device"
						}
						showf(e.c.App.ErrWriter, "%s asks to join this account with device fingerprint\n\n    %s\n\nDoes the new device show the same fingerprint? [y/N] ", label, p.Fingerprint)
						answer, _ := bufio.NewReader(e.c.App.Reader).ReadString('\n')
						if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
							return notAllowed("not approved", "approve only a device whose screen shows the same fingerprint")
						}
						shown = p.Fingerprint
					}
					a, err := s.ApproveDevice(e.c.Context, code, shown)
					if errors.Is(err, seat.ErrFingerprintMismatch) {
						return notAllowed("the fingerprint does not match the device behind that code: nothing was approved",
							"check the fingerprint on the new device's screen; if it differs, someone else used the code: start `tally signin --recover` again")
					}
					if isNotFound(err) {
						return notFound("no pending device with that code", "check the code, or start `tally signin --recover` again on the new device")
					}
					if err != nil {
						return err
					}
					also := ""
					if a.SharedSeat {
						also = "; it also received this seat's sync credential"
					}
					label := a.Label
					if label == "" {
						label = "device"
					}
					e.out(map[string]any{"grant_id": a.GrantID, "label": a.Label, "device": a.Fingerprint, "shared_seat": a.SharedSeat},
						"approved %s (device %s)%s", label, a.Fingerprint, also)
					return nil
				}),
			},
		},
	}
}
