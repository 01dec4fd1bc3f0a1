package cli

import (
	"errors"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// orgCommand is `tally org`.
func orgCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "org",
		Usage: "invite new accounts into this account's org",
		Subcommands: []*ucli.Command{
			orgInviteCommand(),
		},
	}
}

// orgInviteCommand is `tally org invite`.
func orgInviteCommand() *ucli.Command {
	return &ucli.Command{
		Name: "invite", Usage: "mint an org invite for a new account (prints it)",
		Flags: []ucli.Flag{
			usesFlag("accounts may sign up with it"), ttlFlag(),
		},
		Action: withSeat(runOrgInvite),
	}
}

// runOrgInvite runs `tally org invite`.
func runOrgInvite(e *env, s *seat.Seat) error {
	if len(e.args) != 0 {
		return badUsage("tally org invite takes no arguments", "tally org invite [--uses N] [--ttl D]")
	}
	uses, ttl, err := e.usesTTL()
	if err != nil {
		return err
	}
	org, err := s.Org(e.c.Context)
	if err != nil {
		return err
	}
	tok, exp, err := s.OrgInvite(e.c.Context, uses, ttl)
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Status == 400 {
		return &usageError{ae.Message, "--uses is 1 to 100, --ttl 1m to 168h"}
	}
	if err != nil {
		return err
	}
	if e.json {
		e.out(map[string]any{"org": org, "token": tok, "expires_at": exp}, "")
		return nil
	}
	// The token alone on stdout, so TOKEN=$(tally org invite) works.
	showf(e.c.App.Writer, "%s\n", tok)
	showf(e.c.App.ErrWriter, "valid until %s; the new account runs: tally signin --org %s --org-invite %s\n",
		exp.Local().Format("2006-01-02 15:04"), org, tok)
	return nil
}
