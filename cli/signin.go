package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// signinCommand is `tally signin`.
func signinCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "signin",
		Usage: "mint an account (open signup, or with an invite or signup token), take one the operator made (--api-key), link a new device without the phrase (--link), or bring the phrase to a new device (--recover)",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "api-key", Usage: "take the account of this API `KEY` (sk_live_…), which the operator made with tally serve accounts create (the key shows in the process list and shell history: --api-key-file does not)"},
			&ucli.StringFlag{Name: "api-key-file", Usage: "--api-key, the key read from this `FILE` (- for stdin)"},
			&ucli.StringFlag{Name: "signup-token", Usage: "a one-use signup `TOKEN` (skt_sup_…) from the operator (tally serve token), for a directory whose signup is invite"},
			&ucli.StringFlag{Name: "email", Usage: "account e-mail", DefaultText: "tally@localhost"},
			&ucli.StringFlag{Name: "org", Usage: "account org; an existing org needs --org-invite", DefaultText: "seat-<the identity's short form>"},
			&ucli.StringFlag{Name: "org-invite", Usage: "an org invite (`TOKEN`, skt_org_…) that an account of --org made with tally org invite"},
		}, recoverFlags()...),
		Action: withSeat(runSignin),
	}
}

// runSignin runs `tally signin`, one of its ways in.
func runSignin(e *env, s *seat.Seat) error {
	if e.c.Bool("recover") && e.c.Bool("link") {
		return &usageError{"--recover and --link are two ways in", "--link on a device that should never hold the phrase; --recover to bring the phrase"}
	}
	if e.c.Bool("recover") {
		return signinRecover(e, s)
	}
	if e.c.Bool("link") {
		return signinLink(e, s)
	}
	if err := needSeed(s); err != nil {
		return &usageError{"this home has no seat yet, so there is nothing to sign in", "run `tally init` first (or `tally signin --link` to link this device to your account without the phrase, or `tally signin --recover` to bring the phrase)"}
	}
	key, err := apiKeyFlag(e)
	if err != nil {
		return err
	}
	if key != "" {
		return signinKey(e, s, key)
	}
	return signinNew(e, s)
}

// signinKey is `tally signin --api-key KEY` (or --api-key-file): it takes
// the account the operator made.
func signinKey(e *env, s *seat.Seat, key string) error {
	if e.c.String("org-invite") != "" || e.c.String("org") != "" || e.c.String("signup-token") != "" {
		return badUsage("--api-key takes an account that exists", "tally signin --api-key KEY, without --org, --org-invite or --signup-token")
	}
	a, err := signinAPIKey(e, s, key)
	if err != nil {
		return err
	}
	e.out(map[string]string{"account_id": a.AccountID, "org": a.Org}, "signed in: org %s (account %s)", safe(a.Org), a.AccountID)
	return nil
}

// signinNew is `tally signin` making a new account: by open signup, into
// an org with --org-invite, or with the operator's --signup-token.
func signinNew(e *env, s *seat.Seat) error {
	email, org, invite := e.c.String("email"), e.c.String("org"), e.c.String("org-invite")
	if email == "" {
		email = "tally@localhost"
	}
	if invite != "" && org == "" {
		return badUsage("--org-invite needs --org", "tally signin --org ORG --org-invite TOKEN, with the org the invite is for")
	}
	if org == "" {
		did, err := s.Identity()
		if err != nil {
			return err
		}
		org = "seat-" + did[len(did)-8:]
	}
	var a seat.Account
	var err error
	if tok := e.c.String("signup-token"); tok != "" {
		a, err = signinSignupToken(e, s, email, org, tok)
	} else {
		a, err = s.SignInInvited(e.c.Context, email, org, invite)
	}
	err = signupHint(err)
	switch {
	case errors.Is(err, seat.ErrOrgTaken):
		return &usageError{"the org " + org + " already exists and belongs to its accounts",
			"ask an account of " + org + " to run `tally org invite`, then run `tally signin --org " + org + " --org-invite TOKEN`; or pick a new org"}
	case errors.Is(err, seat.ErrInvalidOrgInvite):
		return notAllowed("the org invite is invalid, expired, used up or not for "+org,
			"ask an account of "+org+" for a new one (`tally org invite`)")
	case err != nil:
		return err
	}
	e.out(map[string]string{"account_id": a.AccountID, "org": a.Org}, "signed in: org %s (account %s)", a.Org, a.AccountID)
	return nil
}

// apiKeyFlag is the API key of --api-key or --api-key-file ("" when
// neither is given).
func apiKeyFlag(e *env) (string, error) {
	key, path := e.c.String("api-key"), e.c.String("api-key-file")
	switch {
	case path == "":
		return key, nil
	case key != "":
		return "", badUsage("--api-key and --api-key-file both set", "give the key one way")
	}
	var r io.Reader = e.c.App.Reader
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", notFound("cannot read the API key file", err.Error())
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return "", err
	}
	key, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	if key = strings.TrimSpace(key); key == "" {
		return "", badUsage("the API key file is empty", "put the sk_live_… key that tally serve accounts create printed in it")
	}
	return key, nil
}

// signinAPIKey takes an account the operator made (tally serve account
// create): it mints a token with the key, which proves the key and names
// the account and its org, and keeps the key in the home.
func signinAPIKey(e *env, s *seat.Seat, key string) (seat.Account, error) {
	if _, err := s.AccountID(e.c.Context); err == nil {
		return seat.Account{}, seat.ErrSignedIn
	}
	dc := &seat.DirectoryClient{BaseURL: e.apiURL, Credential: key, HTTP: &http.Client{Transport: e.hooks}}
	tok, _, err := dc.Token(e.c.Context)
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		return seat.Account{}, notAllowed("the directory does not know this API key", "check the key the operator gave you, and that --api-url is that operator's directory")
	}
	if err != nil {
		return seat.Account{}, err
	}
	// The token's claims name the account; the key is what the
	// directory checks on every call, so nothing here trusts them more.
	var claims struct {
		Sub string `json:"sub"`
		Org string `json:"org"`
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return seat.Account{}, errors.New("the directory minted a token that is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &claims) != nil || claims.Sub == "" || claims.Org == "" {
		return seat.Account{}, errors.New("the directory's token does not name the account and its org")
	}
	if err := s.UseAccount(e.c.Context, claims.Sub, claims.Org, key); err != nil {
		return seat.Account{}, err
	}
	s.Restock(e.c.Context)
	return seat.Account{AccountID: claims.Sub, Org: claims.Org}, nil
}

// signinSignupToken creates an account with an operator's signup token
// (for a directory whose signup is invite).
func signinSignupToken(e *env, s *seat.Seat, email, org, token string) (seat.Account, error) {
	if _, err := s.AccountID(e.c.Context); err == nil {
		return seat.Account{}, seat.ErrSignedIn
	}
	b, _ := json.Marshal(map[string]string{"email": email, "org": org, "signup_token": token})
	req, err := http.NewRequestWithContext(e.c.Context, "POST", strings.TrimRight(e.apiURL, "/")+"/v1/accounts", bytes.NewReader(b))
	if err != nil {
		return seat.Account{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: e.hooks}).Do(req)
	if err != nil {
		return seat.Account{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return seat.Account{}, err
	}
	if resp.StatusCode != http.StatusCreated {
		ae := &seat.APIError{Status: resp.StatusCode}
		json.Unmarshal(body, ae)
		return seat.Account{}, ae
	}
	var a seat.Account
	if err := json.Unmarshal(body, &a); err != nil || a.APIKey == "" {
		return seat.Account{}, errors.New("the directory's answer has no account")
	}
	if err := s.UseAccount(e.c.Context, a.AccountID, a.Org, a.APIKey); err != nil {
		return seat.Account{}, err
	}
	s.Restock(e.c.Context)
	return a, nil
}

// signupHint turns the directory's refusals of a signup into what to do.
func signupHint(err error) error {
	var ae *seat.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case ae.Status == http.StatusUnauthorized:
		return notAllowed("signup on this directory is closed: its operator makes the accounts",
			"ask the operator for an account (`tally serve account create --email E --org ORG` prints its API key), then run `tally signin --api-key KEY`")
	case ae.Code == "signup_requires_invite":
		return notAllowed("signup on this directory needs an invite",
			"ask an account of the org for an org invite (`tally signin --org ORG --org-invite TOKEN`), or the operator for a signup token (`tally serve token`, then `tally signin --signup-token TOKEN`)")
	case ae.Code == "invalid_signup_token":
		return notAllowed("the signup token is invalid, expired or already used", "ask the operator for a new one (`tally serve token`)")
	}
	return err
}

func recoverFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "link", Usage: "new device, in an empty home: link it to your account without the phrase; approve the code it prints on a device that holds the identity (tally devices approve)"},
		&ucli.BoolFlag{Name: "recover", Usage: "new device: enter the phrase (this device then holds the identity), then approve the user code on a signed-in device"},
		&ucli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "with --link or --recover: how long to wait for the approval"},
		&ucli.StringFlag{Name: "label", Usage: "with --link or --recover: name of this device shown to the approver; the directory keeps it until the grant is delivered", Value: defaultDeviceLabel},
	}
}

// defaultDeviceLabel is the label of a device grant when --label is not
// given: neutral, where the host name would tell the directory (and
// whoever reads its database) what the machine is called.
const defaultDeviceLabel = "new device"

// deviceLabel is --label, or the host name.
func deviceLabel(e *env) string {
	label := e.c.String("label")
	if label == "" {
		label = defaultDeviceLabel
	}
	if len(label) > 128 {
		label = label[:128]
	}
	return label
}

// signinLink is `tally signin --link`: make this empty home a linked
// device of an account, approved on a device that holds the identity.
func signinLink(e *env, s *seat.Seat) error {
	ctx := e.c.Context
	g, err := s.RequestLink(ctx, deviceLabel(e))
	if err != nil {
		return err
	}
	e.out(map[string]any{"code": g.UserCode, "fingerprint": g.Fingerprint, "expires_at": g.ExpiresAt},
		"code: %s\nfingerprint: %s", g.UserCode, g.Fingerprint)
	if !e.json {
		showf(e.c.App.ErrWriter, "on a device that holds your identity run: tally devices approve %s\n(approve only if it shows the fingerprint %s; waiting up to %v, Ctrl-C to stop)\n",
			g.UserCode, g.Fingerprint, e.c.Duration("wait"))
	}
	wctx, cancel := context.WithTimeout(ctx, e.c.Duration("wait"))
	defer cancel()
	res, err := s.WaitLink(wctx, g)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return &usageError{"not approved within " + e.c.Duration("wait").String(), "run `tally signin --link` again"}
	case ctx.Err() != nil:
		return &usageError{"stopped before the device was approved", "run `tally signin --link` again"}
	case errors.Is(err, seat.ErrGrantExpired):
		return &usageError{"the code expired before it was approved", "run `tally signin --link` again"}
	case err != nil:
		return err
	}
	e.out(map[string]any{"account_id": res.AccountID, "org": res.Org, "identity": res.Person, "device": res.DeviceID, "epochs": res.Epochs, "rooms": res.Offered},
		"linked: device %s of %s in org %s (account %s); it holds no phrase. Run `tally pull`; `tally devices join` once the rooms let it in",
		res.DeviceID, res.Person, safe(res.Org), res.AccountID)
	return nil
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
	g, err := s.RequestDevice(ctx, deviceLabel(e))
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
