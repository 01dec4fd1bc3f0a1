package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/seat"
)

// The operator's commands: they run beside a tally serve, read the
// internal secret from its data folder, and call the directory's
// operator endpoints over HTTP (the databases are the running serve's).

func operatorFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "data", Value: defaultDataDir, Usage: "the data folder of the serve, which holds its internal secret"},
		&ucli.StringFlag{Name: "api-url", Value: "http://" + defaultAPIAddr, Usage: "the directory of that serve (when nothing answers there, the command opens the data folder's directory itself)"},
		&ucli.StringFlag{Name: "directory-db", Usage: "the directory's database, as tally serve --directory-db names it", DefaultText: "<data>/directory.db"},
	}
}

// signupTokenCommand is tally serve token.
func signupTokenCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "token",
		Usage: "mint a one-use signup token for one person (for --signup invite)",
		Description: "Prints a skt_sup_… token. The person signs up with it once:\n" +
			"tally signin --signup-token TOKEN. The directory keeps only its hash.",
		Flags: append(operatorFlags(),
			&ucli.DurationFlag{Name: "ttl", Value: 7 * 24 * time.Hour, Usage: "how long the token is valid (1m to 720h)"},
		),
		Action: operatorAction(func(o *operator, args []string) error {
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
		}),
	}
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

// accountCreateCommand is tally serve account(s) create.
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
		Action: operatorAction(func(o *operator, args []string) error {
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
		}),
	}
}

// accountsCommand is tally serve accounts list and remove.
func accountsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "accounts",
		Usage: "create, list, disable and remove accounts",
		Subcommands: []*ucli.Command{accountCreateCommand(), {
			Name:      "disable",
			Usage:     "revoke accounts at once: their keys and tokens stop working on both planes, their data stays",
			ArgsUsage: "ACCOUNT_ID…",
			Flags:     operatorFlags(),
			Action: operatorAction(func(o *operator, args []string) error {
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
			}),
		}, {
			Name:  "list",
			Usage: "list the accounts whose last sign-in is at least --idle ago",
			Flags: append(operatorFlags(),
				&ucli.DurationFlag{Name: "idle", Usage: "how long without a sign-in (counted in whole days)", DefaultText: "0: every account"},
			),
			Action: operatorAction(func(o *operator, args []string) error {
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
			}),
		}, {
			Name:      "remove",
			Usage:     "revoke and delete accounts (not those that own channels)",
			ArgsUsage: "ACCOUNT_ID…",
			Flags:     operatorFlags(),
			Action: operatorAction(func(o *operator, args []string) error {
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
			}),
		}},
	}
}

// operator is one operator command's context.
type operator struct {
	c      *ucli.Context
	e      *env
	api    string
	secret string
	data   string

	// local is set when the data folder's directory runs in this
	// process, on a loopback listener api then names, because no tally
	// serve answered at api (see do).
	local      bool
	localClose func()
}

func operatorAction(f func(*operator, []string) error) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		args := c.Args().Slice()
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		o := &operator{c: c, e: e, api: strings.TrimRight(c.String("api-url"), "/"), data: c.String("data")}
		b, err := os.ReadFile(filepath.Join(o.data, "internal_secret"))
		switch {
		case err == nil:
			o.secret = strings.TrimSpace(string(b))
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
		defer o.close()
		return f(o, args)
	}
}

// close stops the local directory, if one was started.
func (o *operator) close() {
	if o.localClose != nil {
		o.localClose()
	}
}

// openLocal runs the directory of the data folder in this process: for a
// data folder whose tally serve is not running (or was never started,
// whose secrets it then makes as serve would). It holds the directory's
// lock meanwhile, so a serve starting on the folder waits its turn.
func (o *operator) openLocal() error {
	if err := datadir.Prepare(o.data); err != nil {
		return err
	}
	lock, err := datadir.Lock(filepath.Join(o.data, "directory.lock"))
	if err != nil {
		return fmt.Errorf("no tally serve answers at %s, and another holds %s (pass the --api-url it listens on): %w", o.api, o.data, err)
	}
	jwtSecret, internal, err := secretSources{}.load(o.data)
	if err != nil {
		lock.Unlock()
		return err
	}
	cfg := skytale.DirectoryConfig{DBPath: filepath.Join(o.data, "directory.db"), JWTSecret: jwtSecret, InternalSecret: internal,
		Logger: slog.New(slog.DiscardHandler)}
	if db := o.c.String("directory-db"); db != "" {
		cfg.DBPath, cfg.Database = "", db
	}
	if isPostgresURL(cfg.Database) {
		cfg.Backend = pgstore.Backend{}
	}
	d, err := skytale.NewDirectory(cfg)
	if err != nil {
		lock.Unlock()
		return err
	}
	if err := datadir.Secure(o.data); err != nil {
		d.Close(context.Background())
		lock.Unlock()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.Close(context.Background())
		lock.Unlock()
		return err
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	o.local, o.secret, o.api = true, string(internal), "http://"+ln.Addr().String()
	o.localClose = func() {
		srv.Close()
		d.Close(context.Background())
		lock.Unlock()
	}
	return nil
}

// call sends a JSON request with the internal secret and decodes the
// answer into out (unless nil); an error answer becomes its message.
func (o *operator) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(o.c.Context, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, o.api+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+o.secret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := o.do(req)
	if err != nil {
		return fmt.Errorf("the directory at %s: %w", o.api, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Message string }
		json.Unmarshal(b, &e)
		if e.Error == "" {
			return fmt.Errorf("the directory answered %s", resp.Status)
		}
		return fmt.Errorf("the directory refused: %s (%s)", safe(e.Message), safe(e.Error))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// do sends req to the running tally serve or, when nothing listens at
// its address, to the data folder's directory run here.
func (o *operator) do(req *http.Request) (*http.Response, error) {
	if !o.local && o.secret != "" {
		resp, err := http.DefaultClient.Do(req)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return resp, err
		}
	}
	if !o.local {
		if err := o.openLocal(); err != nil {
			return nil, err
		}
	}
	local, err := url.Parse(o.api)
	if err != nil {
		return nil, err
	}
	req.URL.Scheme, req.URL.Host, req.Host = local.Scheme, local.Host, local.Host
	req.Header.Set("Authorization", "Bearer "+o.secret)
	if req.GetBody != nil {
		if req.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return http.DefaultClient.Do(req)
}

// safe is text a server sent, fit for a terminal: control characters and
// other non-printing runes are escaped (the --json form stays exact).
func safe(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
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
