package cli

import (
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// contactCommand is `tally contact`: who may add this person to rooms.
func contactCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "contact",
		Usage: "decide who may add you to rooms, and see who did",
		Description: "Accounts that share a room or an org with you may add you to rooms (`tally room add`);\n" +
			"anyone else needs an add-token you made and gave them (`tally contact token`).\n" +
			"`tally contact claims` shows who took your join offers, for which room.",
		Subcommands: []*ucli.Command{
			contactTokenCommand(),
			contactTokensCommand(),
			contactRevokeCommand(),
			contactClaimsCommand(),
		},
	}
}

// contactTokenCommand is `tally contact token`.
func contactTokenCommand() *ucli.Command {
	return &ucli.Command{
		Name: "token", Usage: "make an add-token for someone who shares no room or org with you (prints it)",
		Flags: []ucli.Flag{
			usesFlag("adds it allows"), ttlFlag(),
		},
		Action: withSeat(runContactToken),
	}
}

// runContactToken runs `tally contact token`.
func runContactToken(e *env, s *seat.Seat) error {
	if len(e.args) != 0 {
		return badUsage("tally contact token takes no arguments", "tally contact token [--ttl D] [--uses N]")
	}
	uses, ttl, err := e.usesTTL()
	if err != nil {
		return err
	}
	tok, err := s.ContactToken(e.c.Context, ttl, uses)
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Status == 400 {
		return badUsage(ae.Message, "--uses is 1 to 100, --ttl 1m to 168h")
	}
	if err != nil {
		return err
	}
	if e.json {
		e.out(map[string]any{"id": tok.ID, "token": tok.Token, "max_uses": tok.MaxUses, "expires_at": tok.ExpiresAt}, "")
		return nil
	}
	// The token alone on stdout, so TOKEN=$(tally contact token) works.
	showf(e.c.App.Writer, "%s\n", tok.Token)
	showf(e.c.App.ErrWriter, "id %s, %s, valid until %s; the adder runs: tally room add ROOM %s\n",
		tok.ID, plural(tok.MaxUses, "use", "uses"), tok.ExpiresAt.Local().Format("2006-01-02 15:04"), tok.Token)
	return nil
}

// contactTokensCommand is `tally contact tokens`.
func contactTokensCommand() *ucli.Command {
	return &ucli.Command{
		Name: "tokens", Usage: "list your add-tokens (ids, uses, expiry; never the tokens)",
		Action: withSeat(runContactTokens),
	}
}

// runContactTokens runs `tally contact tokens`.
func runContactTokens(e *env, s *seat.Seat) error {
	if len(e.args) != 0 {
		return badUsage("tally contact tokens takes no arguments", "")
	}
	toks, err := s.ContactTokens(e.c.Context)
	if err != nil {
		return err
	}
	if e.json {
		e.out(map[string]any{"tokens": toks}, "")
		return nil
	}
	if len(toks) == 0 {
		fmt.Fprintln(e.c.App.ErrWriter, "no add-tokens (`tally contact token` makes one)")
		return nil
	}
	for _, t := range toks {
		showf(e.c.App.Writer, "%s  used %d of %d  valid until %s\n", t.ID, t.Uses, t.MaxUses, t.ExpiresAt.Local().Format("2006-01-02 15:04"))
	}
	return nil
}

// contactRevokeCommand is `tally contact revoke`.
func contactRevokeCommand() *ucli.Command {
	return &ucli.Command{
		Name: "revoke", Usage: "revoke an add-token at once", ArgsUsage: "ID",
		Action: withSeat(runContactRevoke),
	}
}

// runContactRevoke runs `tally contact revoke`.
func runContactRevoke(e *env, s *seat.Seat) error {
	if len(e.args) != 1 {
		return badUsage("want the add-token's ID", "see `tally contact tokens`")
	}
	err := s.ContactRevoke(e.c.Context, e.args[0])
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return notFound("no add-token "+e.args[0]+" of yours", "see `tally contact tokens`")
	}
	if err != nil {
		return err
	}
	e.out(map[string]any{"id": e.args[0], "revoked": true}, "revoked add-token %s", e.args[0])
	return nil
}

// contactClaimsCommand is `tally contact claims`.
func contactClaimsCommand() *ucli.Command {
	return &ucli.Command{
		Name: "claims", Usage: "who took your join offers, for which room (newest first, as of the last sync)",
		Action: withSeat(runContactClaims),
	}
}

// runContactClaims runs `tally contact claims`.
func runContactClaims(e *env, s *seat.Seat) error {
	if len(e.args) != 0 {
		return badUsage("tally contact claims takes no arguments", "")
	}
	s.Restock(e.c.Context) // read the directory's news first; offline, the home's list stands
	claims, err := s.ContactClaims(e.c.Context)
	if err != nil {
		return err
	}
	if e.json {
		list := []map[string]any{}
		for _, c := range claims {
			list = append(list, map[string]any{"claimed_by": c.ClaimedBy, "channel": c.Channel, "device": c.Device, "at": c.At, "last_resort": c.LastResort})
		}
		e.out(map[string]any{"claims": list}, "")
		return nil
	}
	if len(claims) == 0 {
		fmt.Fprintln(e.c.App.ErrWriter, "nobody has claimed your join offers")
		return nil
	}
	for _, c := range claims {
		lr := ""
		if c.LastResort {
			lr = "  (last-resort offer)"
		}
		showf(e.c.App.Writer, "%s  account %s  for %s  device %s%s\n",
			c.At.Local().Format("2006-01-02 15:04"), c.ClaimedBy, c.Channel, seat.DeviceID(c.Device), lr)
	}
	return nil
}
