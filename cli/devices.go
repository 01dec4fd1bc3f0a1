package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// testOnlyTerminal makes devices approve treat its input as a terminal, so
// tests can answer its question.
var testOnlyTerminal bool

// devicesCommand is `tally devices`.
func devicesCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "devices",
		Usage: "manage this account's devices",
		Description: "Each device of a person is a member of that person's rooms, shown as the person.\n" +
			"A linked device (tally signin --link) holds no phrase: only a device that holds the identity\n" +
			"(made by tally init or tally signin --recover) can approve and revoke devices.\n" +
			"A device approved with `devices approve` offers itself to the approver's rooms; the approver\n" +
			"(or a room's owner or admin) adds it on its next command there, and the new device joins\n" +
			"with `devices join`.",
		Subcommands: []*ucli.Command{
			devicesListCommand(),
			devicesRevokeCommand(),
			devicesJoinCommand(),
			devicesApproveCommand(),
		},
	}
}

// devicesListCommand is `tally devices list`.
func devicesListCommand() *ucli.Command {
	return &ucli.Command{
		Name: "list", Usage: "list this person's devices: label, id, when linked, last seen, whether it holds the identity",
		Action: withSeat(runDevicesList),
	}
}

// runDevicesList runs `tally devices list`.
func runDevicesList(e *env, s *seat.Seat) error {
	if len(e.args) != 0 {
		return badUsage("tally devices list takes no arguments", "")
	}
	devs, err := s.DeviceList(e.c.Context)
	if err != nil {
		return err
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	if e.json {
		list := []map[string]any{}
		for _, d := range devs {
			m := map[string]any{"id": d.ID, "label": d.Label, "holds_identity": d.HoldsIdentity, "this": d.This,
				"linked_at": when(d.LinkedAt), "last_seen": when(d.LastSeen), "rooms": append([]string{}, d.Rooms...)}
			if !d.RevokedAt.IsZero() {
				m["revoked_at"] = when(d.RevokedAt)
			}
			list = append(list, m)
		}
		e.out(map[string]any{"devices": list}, "")
		return nil
	}
	if len(devs) == 0 {
		fmt.Fprintln(e.c.App.ErrWriter, "no devices yet: link one with `tally signin --link` on it")
		return nil
	}
	showf(e.c.App.Writer, "%-8s  %-20s  %-20s  %-20s  %-8s  %s\n", "ID", "LABEL", "LINKED", "LAST SEEN", "IDENTITY", "")
	for _, d := range devs {
		notes := []string{}
		if d.This {
			notes = append(notes, "this device")
		}
		if !d.RevokedAt.IsZero() {
			notes = append(notes, "revoked "+when(d.RevokedAt))
		}
		if len(d.Rooms) > 0 {
			notes = append(notes, plural(len(d.Rooms), "room", "rooms"))
		}
		holds := "no"
		if d.HoldsIdentity {
			holds = "yes"
		}
		label := d.Label
		if label == "" {
			label = "-"
		}
		showf(e.c.App.Writer, "%-8s  %-20s  %-20s  %-20s  %-8s  %s\n", d.ID, label, when(d.LinkedAt), when(d.LastSeen), holds, strings.Join(notes, ", "))
	}
	return nil
}

// devicesRevokeCommand is `tally devices revoke`.
func devicesRevokeCommand() *ucli.Command {
	return &ucli.Command{
		Name: "revoke", Usage: "revoke one of this person's devices, for good (only on a device that holds the identity)", ArgsUsage: "ID",
		Description: "Signs a revocation with the identity key: the directory ends the device's API key at once\n" +
			"(both planes refuse it, its open connections close), the sync key moves to a new epoch the\n" +
			"device is not given, and it is removed from every room of this home (one commit per room);\n" +
			"every member's seat refuses its key from then on. It keeps what it read before.\n" +
			"A device that held the phrase can make itself new keys: revoking it cannot cut that.",
		Action: withSeat(runDevicesRevoke),
	}
}

// runDevicesRevoke runs `tally devices revoke`.
func runDevicesRevoke(e *env, s *seat.Seat) error {
	if len(e.args) != 1 {
		return badUsage("want the device's ID", "see `tally devices list`")
	}
	r, err := s.Revoke(e.c.Context, e.args[0])
	if errors.Is(err, seat.ErrNoDevice) {
		return notFound("no device "+e.args[0]+" of yours", "see `tally devices list`")
	}
	if err != nil {
		return err
	}
	short := make([]string, len(r.Rooms))
	for i, x := range r.Rooms {
		short[i] = shortRoom(e, s, x)
	}
	what := "revoked device " + e.args[0]
	if r.Linked {
		what += fmt.Sprintf(": its API key no longer works; the sync key moved to epoch %d (given to %s)", r.Epoch, plural(r.Given, "other linked device", "other linked devices"))
	} else {
		what += ": its key is refused in every room from now on (it held the phrase, so it can make new keys: only a new identity cuts that)"
	}
	if len(short) > 0 {
		what += "; removed from " + strings.Join(short, ", ")
	}
	e.out(map[string]any{"device": e.args[0], "linked": r.Linked, "epoch": r.Epoch, "rooms": append([]string{}, r.Rooms...)}, "%s", what)
	return nil
}

// devicesJoinCommand is `tally devices join`.
func devicesJoinCommand() *ucli.Command {
	return &ucli.Command{
		Name: "join", Usage: "join the rooms this device was let into after its approval",
		Action: withSeat(runDevicesJoin),
	}
}

// runDevicesJoin runs `tally devices join`.
func runDevicesJoin(e *env, s *seat.Seat) error {
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
}

// devicesApproveCommand is `tally devices approve`.
func devicesApproveCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "approve",
		Usage: "approve a new device by the user code it shows, once its fingerprint matches (linking takes a device that holds the identity)",
		Description: "Shows the requesting device's fingerprint and asks whether the new device shows the same;\n" +
			"without a terminal, pass the fingerprint the new device shows with --fingerprint.\n" +
			"A different fingerprint means someone else's device is behind the code: nothing is approved.",
		ArgsUsage: "CODE",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "fingerprint", Usage: "the device fingerprint (`FP`) the new device shows, for scripts and pipes"},
		},
		Action: withSeat(runDevicesApprove),
	}
}

// runDevicesApprove runs `tally devices approve`.
func runDevicesApprove(e *env, s *seat.Seat) error {
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
	if a.Linked {
		also = "; linked as device " + a.DeviceID + " (it holds no phrase)"
	}
	label := a.Label
	if label == "" {
		label = "device"
	}
	e.out(map[string]any{"grant_id": a.GrantID, "label": a.Label, "device": a.Fingerprint, "shared_seat": a.SharedSeat, "linked": a.Linked, "device_id": a.DeviceID},
		"approved %s (device %s)%s", label, a.Fingerprint, also)
	return nil
}
