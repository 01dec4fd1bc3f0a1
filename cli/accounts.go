package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"
)

// signupTokenCommand is `tally serve token`.
func signupTokenCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "token",
		Usage: "mint a one-use signup token for one person (for --signup invite)",
		Description: "Prints a skt_sup_… token. The person signs up with it once:\n" +
			"tally signin --signup-token TOKEN. The directory keeps only its hash.",
		Flags: append(operatorFlags(),
			&ucli.DurationFlag{Name: "ttl", Value: 7 * 24 * time.Hour, Usage: "how long the token is valid (1m to 720h)"},
		),
		Action: operatorAction(runSignupToken),
	}
}

// runSignupToken runs `tally serve token`.
func runSignupToken(o *operator, args []string) error {
	if len(args) != 0 {
		return badUsage("tally serve token takes no arguments", "tally serve token [--ttl 48h]")
	}
	var out struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := o.call("POST", "/v1/internal/signup-tokens", map[string]int64{"ttl_seconds": int64(o.c.Duration("ttl") / time.Second)}, &out); err != nil {
		return err
	}
	o.e.out(out, "%s\n(valid until %s; one use: tally signin --signup-token TOKEN)", out.Token, out.ExpiresAt)
	return nil
}

// accountCommand is tally serve account create (also tally serve
// accounts create).
func accountCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "account",
		Usage:       "make an account for a person (any --signup mode)",
		Subcommands: []*ucli.Command{accountCreateCommand()},
	}
}

// accountCreateCommand is `tally serve account(s) create`.
func accountCreateCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "create",
		Usage: "create an account and print its API key, to hand to its person",
		Description: "The person takes it with `tally signin --api-key KEY`. The key is shown once;\n" +
			"the directory keeps only its hash. The org is created if it does not exist.",
		Flags: append(operatorFlags(),
			&ucli.StringFlag{Name: "email", Usage: "the account's e-mail", Required: true},
			&ucli.StringFlag{Name: "org", Usage: "the account's org", Required: true},
		),
		Action: operatorAction(runAccountCreate),
	}
}

// runAccountCreate runs `tally serve account(s) create`.
func runAccountCreate(o *operator, args []string) error {
	if len(args) != 0 {
		return badUsage("tally serve account create takes no arguments", "tally serve account create --email E --org ORG")
	}
	var out struct {
		AccountID string `json:"account_id"`
		Org       string `json:"org"`
		APIKey    string `json:"api_key"`
	}
	if err := o.call("POST", "/v1/accounts", map[string]string{"email": o.c.String("email"), "org": o.c.String("org")}, &out); err != nil {
		return err
	}
	o.e.out(out, "%s\n(account %s of org %s; shown once: tally signin --api-key KEY)", out.APIKey, out.AccountID, safe(out.Org))
	return nil
}

// accountsCommand is tally serve accounts: create, disable, list and
// remove.
func accountsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "accounts",
		Usage: "create, list, disable and remove accounts",
		Subcommands: []*ucli.Command{
			accountCreateCommand(),
			accountsDisableCommand(),
			accountsListCommand(),
			accountsRemoveCommand(),
		},
	}
}

// accountsDisableCommand is `tally serve accounts disable`.
func accountsDisableCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "disable",
		Usage:     "revoke accounts at once: their keys and tokens stop working on both planes, their data stays",
		ArgsUsage: "ACCOUNT_ID…",
		Flags:     operatorFlags(),
		Action:    operatorAction(runAccountsDisable),
	}
}

// runAccountsDisable runs `tally serve accounts disable`.
func runAccountsDisable(o *operator, args []string) error {
	if len(args) == 0 {
		return badUsage("name the accounts to disable", "tally serve accounts disable ACCOUNT_ID…")
	}
	for _, id := range args {
		if err := o.call("POST", "/v1/revocations", map[string]string{"did": "did:skytale:" + id}, nil); err != nil {
			return fmt.Errorf("%s: %w", safe(id), err)
		}
		o.e.out(map[string]any{"account_id": id, "disabled": true}, "disabled %s", safe(id))
	}
	return nil
}

// accountsListCommand is `tally serve accounts list`.
func accountsListCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the accounts whose last sign-in is at least --idle ago",
		Flags: append(operatorFlags(),
			&ucli.DurationFlag{Name: "idle", Usage: "how long without a sign-in (counted in whole days)", DefaultText: "0: every account"},
		),
		Action: operatorAction(runAccountsList),
	}
}

// runAccountsList runs `tally serve accounts list`.
func runAccountsList(o *operator, args []string) error {
	if len(args) != 0 {
		return badUsage("tally serve accounts list takes no arguments", "tally serve accounts list [--idle 720h]")
	}
	days := int64(o.c.Duration("idle") / (24 * time.Hour))
	after := ""
	for {
		var page struct {
			Accounts []struct {
				AccountID  string `json:"account_id"`
				Email      string `json:"email"`
				Org        string `json:"org"`
				CreatedAt  string `json:"created_at"`
				LastSignin string `json:"last_signin"`
			} `json:"accounts"`
			HasMore bool   `json:"has_more"`
			Next    string `json:"next"`
		}
		q := url.Values{"idle_days": {strconv.FormatInt(days, 10)}, "after": {after}, "limit": {"500"}}
		if err := o.call("GET", "/v1/internal/accounts?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, a := range page.Accounts {
			o.e.out(a, "%s  last sign-in %s  org %s  %s", a.AccountID, a.LastSignin, safe(a.Org), safe(a.Email))
		}
		if !page.HasMore || page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

// accountsRemoveCommand is `tally serve accounts remove`.
func accountsRemoveCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "remove",
		Usage:     "revoke and delete accounts (not those that own channels)",
		ArgsUsage: "ACCOUNT_ID…",
		Flags:     operatorFlags(),
		Action:    operatorAction(runAccountsRemove),
	}
}

// runAccountsRemove runs `tally serve accounts remove`.
func runAccountsRemove(o *operator, args []string) error {
	if len(args) == 0 {
		return badUsage("name the accounts to remove", "tally serve accounts remove ACCOUNT_ID…")
	}
	for _, id := range args {
		if err := o.call("DELETE", "/v1/internal/accounts/"+url.PathEscape(id), nil, nil); err != nil {
			return fmt.Errorf("%s: %w", safe(id), err)
		}
		o.e.out(map[string]any{"account_id": id, "removed": true}, "removed %s", safe(id))
	}
	return nil
}
