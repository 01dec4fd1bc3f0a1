package cli

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/seat"
)

// setting is one key of `tally config`.
type setting struct {
	key, about string
	def        func() string // the value in force when none is set
}

// settings are the keys of `tally config`, in the order config list shows.
var settings = []setting{
	{"api_url", "directory base URL (env TALLY_API_URL or SKYTALE_API_URL, flag --api-url)", func() string { a, _ := defaultURLs(); return a }},
	{"relay_url", "relay base URL (env TALLY_RELAY_URL or SKYTALE_RELAY_URL, flag --relay-url)", func() string { _, r := defaultURLs(); return r }},
	{"cover_traffic", "on or off: cover frames while a watch is connected", func() string { return "on" }},
	{"cover_interval", "mean time between cover frames, e.g. 30s (at least 1s)", func() string { return cover.DefaultMeanInterval.String() }},
	{seat.SettingName, "the name your rooms show beside your key's short form (1 to 64 printable characters)", func() string { return "" }},
}

func settingNamed(k string) (setting, bool) {
	for _, s := range settings {
		if s.key == k {
			return s, true
		}
	}
	return setting{}, false
}

// The global flags, accepted before the command and after it.
func globalFlags() []ucli.Flag {
	const cat = globalCategory
	return []ucli.Flag{
		&ucli.StringFlag{Name: "home", Category: cat, Usage: "seat folder", DefaultText: "$TALLY_HOME or ~/.tally"},
		&ucli.StringFlag{Name: "api-url", Category: cat, Usage: "directory URL (beats TALLY_API_URL, or its alias SKYTALE_API_URL, and the config file)", DefaultText: "http://" + defaultAPIAddr},
		&ucli.StringFlag{Name: "relay-url", Category: cat, Usage: "relay URL (beats TALLY_RELAY_URL, or its alias SKYTALE_RELAY_URL, and the config file)", DefaultText: "http://" + defaultRelayAddr},
		&ucli.BoolFlag{Name: "json", Category: cat, Usage: "print JSON for scripts", DisableDefaultText: true},
		&ucli.BoolFlag{Name: "verbose", Category: cat, Usage: "show whole identities (DIDs) instead of their short form", DisableDefaultText: true},
	}
}

// globalCategory heads the global flags in every command's help.
const globalCategory = "GLOBAL OPTIONS (before the command or after its arguments):"

// globalString is the value of a global flag wherever on the command line
// it was given; the one nearest the command wins.
func globalString(c *ucli.Context, name string) string {
	for _, x := range c.Lineage() {
		for _, n := range x.LocalFlagNames() {
			if n == name {
				return x.String(name)
			}
		}
	}
	return ""
}

func globalBool(c *ucli.Context, name string) bool {
	for _, x := range c.Lineage() {
		for _, n := range x.LocalFlagNames() {
			if n == name {
				return x.Bool(name)
			}
		}
	}
	return false
}

// env is what a seat command needs from the command line and environment.
type env struct {
	c       *ucli.Context
	home    string
	json    bool
	verbose bool

	args             []string // the arguments, without the flags that followed them
	literal          int      // e.args[literal:] came after `--`: text, never a flag or stdin
	apiURL, relayURL string   // as resolved by openSeat
	hooks            *hookTransport
}

func newEnv(c *ucli.Context) (*env, error) {
	home := globalString(c, "home")
	if home == "" {
		home = getenv(c, "TALLY_HOME")
	}
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, badUsage("no home folder", "pass --home DIR or set TALLY_HOME")
		}
		home = filepath.Join(h, ".tally")
	}
	return &env{c: c, home: home, json: globalBool(c, "json"), verbose: globalBool(c, "verbose")}, nil
}

// getenv reads the process environment; tests set values with the
// testOnlyEnv map instead.
func getenv(_ *ucli.Context, key string) string {
	if v, ok := testOnlyEnv[key]; ok {
		return v
	}
	return os.Getenv(key)
}

var testOnlyEnv map[string]string

// readConfig returns the settings kept in the home's SQLite file.
func (e *env) readConfig() (map[string]string, error) {
	return seat.Settings(e.c.Context, e.home)
}

// setting resolves a setting: flag beats environment beats config file.
// It returns "" when none of them sets it.
func (e *env) setting(flag, envKey, cfgKey string) (string, error) {
	if v := globalString(e.c, flag); v != "" {
		return v, nil
	}
	// TALLY_* first; the older SKYTALE_* names stay as aliases.
	for _, k := range []string{envKey, strings.Replace(envKey, "TALLY_", "SKYTALE_", 1)} {
		if v := getenv(e.c, k); v != "" {
			return v, nil
		}
	}
	cfg, err := e.readConfig()
	if err != nil {
		return "", err
	}
	return cfg[cfgKey], nil
}

func (e *env) openSeat() (*seat.Seat, error) {
	api, err := e.setting("api-url", "TALLY_API_URL", "api_url")
	if err != nil {
		return nil, err
	}
	rel, err := e.setting("relay-url", "TALLY_RELAY_URL", "relay_url")
	if err != nil {
		return nil, err
	}
	cfg, err := e.readConfig()
	if err != nil {
		return nil, err
	}
	// With nothing configured, tally talks to a `tally serve` on its
	// default addresses, and says so once per home, before its first
	// request there.
	e.hooks = &hookTransport{base: http.DefaultTransport, notices: map[string]func(){}}
	defAPI, defRelay := defaultURLs()
	notice := func(plane, url, key string) {
		if cfg[noticeKey+key] == url {
			return
		}
		k := strings.TrimRight(url, "/")
		prev := e.hooks.notices[k]
		e.hooks.notices[k] = func() {
			if prev != nil {
				prev()
			}
			e.defaultNotice(plane, url, key)
		}
	}
	if api == "" {
		api = defAPI
		notice("directory", api, "api_url")
	}
	if rel == "" {
		rel = defRelay
		notice("relay", rel, "relay_url")
	}
	e.apiURL, e.relayURL = api, rel
	sc := seat.Config{Home: e.home, APIURL: api, RelayURL: rel, HTTPClient: &http.Client{Transport: e.hooks}}
	sc.Cover.Disabled = cfg["cover_traffic"] == "off"
	if v := cfg["cover_interval"]; v != "" {
		if sc.Cover.MeanInterval, err = parseCoverInterval(v); err != nil {
			return nil, err
		}
	}
	return seat.Open(e.c.Context, sc)
}

// noticeKey prefixes the settings that remember which default URL this
// home has been told about.
const noticeKey = "notice."

func (e *env) defaultNotice(plane, url, key string) {
	w := e.c.App.ErrWriter
	fmt.Fprintf(w, "%s\n", paint(w, colourDim, termtext.Line(
		fmt.Sprintf("no %s URL configured: using %s, where `tally serve` listens by default (`tally config set %s URL` changes it; said once per home)", plane, url, key))))
	// Said once: what fails to be remembered is said again next time.
	seat.SetSetting(context.WithoutCancel(e.c.Context), e.home, noticeKey+key, url)
}

// out prints a human line, its text arguments rendered as in [showf], or
// v as one JSON line with --json (the exact text, JSON-escaped).
func (e *env) out(v any, format string, args ...any) {
	w := e.c.App.Writer
	if e.json {
		b, _ := json.Marshal(v)
		w.Write(append(b, '\n'))
		return
	}
	showf(w, format+"\n", args...)
}

// withSeat runs f on an opened seat and turns seat errors into hints. The
// command's flags, global ones included, may also follow its arguments
// (see [hoistFlags]); after `--` every argument is an argument.
func withSeat(f func(*env, *seat.Seat) error) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		e.args = c.Args().Slice()
		e.literal = literalFrom(c)
		s, err := e.openSeat()
		if err != nil {
			return e.hint(err)
		}
		defer s.Close(context.Background())
		return e.hint(f(e, s))
	}
}

// needSeed refuses a command that needs the seed on a home without one.
func needSeed(s *seat.Seat) error {
	_, err := s.Identity()
	return err
}

// hintOrErr is err with its hint, for a line that reports it and goes on.
func (e *env) hintOrErr(err error) error {
	if h := e.hint(err); h != nil {
		return h
	}
	return err
}

func (e *env) hint(err error) error {
	if h := e.netHint(err); h != nil {
		return h
	}
	return hint(err)
}

func hint(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, seat.ErrNoSeed):
		return &usageError{"this home has no seat yet (no seed)", "run `tally init` (or, on a new device, `tally signin --link`, or `tally signin --recover` to bring the phrase)"}
	case errors.Is(err, seat.ErrSeedExists):
		return &usageError{"this home already has a seed", "use another --home, or `tally backup` to see it"}
	case errors.Is(err, seat.ErrNotSignedIn):
		return &usageError{"not signed in", "run `tally signin`"}
	case errors.Is(err, seat.ErrNotConnected):
		return &usageError{"not connected", "run `tally connect`"}
	case errors.Is(err, seat.ErrSignedIn):
		return &usageError{"this home is already signed in", "use another --home for another account"}
	case errors.Is(err, seat.ErrNoDirectoryURL):
		return &usageError{"no directory URL", "pass --api-url URL, set TALLY_API_URL, or run `tally config set api_url URL`"}
	case errors.Is(err, seat.ErrNoRelayURL):
		return &usageError{"no relay URL", "pass --relay-url URL, set TALLY_RELAY_URL, or run `tally config set relay_url URL`"}
	}
	if errors.Is(err, seat.ErrNotMember) {
		return notAllowed("the relay refused: this account is not a member of the channel ("+err.Error()+")",
			"a channel's owner adds members: rooms by `tally room admit`")
	}
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Code == "revoked" && strings.Contains(ae.Message, "device") || !errors.As(err, &ae) && errors.Is(err, seat.ErrRevoked) {
		return &usageError{"revoked: this device was revoked by its person; it can no longer use the account, and reads nothing sent after the revocation",
			"link it again from a device that holds the identity (`tally signin --link` here, `tally devices approve` there), or recover with the phrase"}
	}
	if !errors.As(err, &ae) && strings.Contains(err.Error(), "subject is revoked") {
		return &usageError{"revoked: the relay refuses this device's credentials (the device or its account was revoked)",
			"see `tally devices list` on a device that holds the identity"}
	}
	if errors.Is(err, seat.ErrNotIdentityHolder) {
		return &usageError{"this device does not hold the identity (it was linked, and holds no phrase)",
			"approve and revoke devices on a device that holds the identity, or recover one with the phrase (`tally signin --recover`)"}
	}
	if errors.Is(err, seat.ErrLinkedHome) {
		return &usageError{"this home is a linked device's and holds no phrase", "use another --home for a phrase"}
	}
	if errors.As(err, &ae) && ae.Code == "revoked" {
		return notAllowed("this account has been revoked at the directory",
			"ask the directory's operator, or sign up again in a new home (`tally --home DIR init`, then `tally signin`)")
	}
	return err
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

// plural is n followed by the singular or plural of a noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func seatCommands() []*ucli.Command {
	return []*ucli.Command{
		{
			Name:  "init",
			Usage: "create the seed (prints the identity, never the words)",
			Flags: []ucli.Flag{&ucli.StringFlag{Name: "name", Usage: "the name your rooms show beside your key's short form (tally config set name changes it later)"}},
			Action: withSeat(func(e *env, s *seat.Seat) error {
				name := e.c.String("name")
				if name != "" && seat.CheckName(name) != nil {
					return &usageError{fmt.Sprintf("%q is not a name tally can show", name), "a name is 1 to 64 printable characters, without spaces at either end"}
				}
				did, err := s.Init(e.c.Context)
				if err != nil {
					return err
				}
				if name != "" {
					if err := s.SetName(e.c.Context, name); err != nil {
						return err
					}
				}
				e.out(map[string]string{"identity": did}, "identity: %s\nrun `tally backup` to write down your 24 words; losing them loses your data", did)
				return nil
			}),
		},
		{
			Name:  "backup",
			Usage: "show the 24 words",
			Flags: []ucli.Flag{&ucli.BoolFlag{Name: "yes", Usage: "do not ask for confirmation"}},
			Action: withSeat(func(e *env, s *seat.Seat) error {
				words, err := s.Phrase()
				if err != nil {
					return err
				}
				if !e.c.Bool("yes") {
					fmt.Fprint(e.c.App.ErrWriter, "anyone who sees these words can read everything; show them? [y/N] ")
					line, _ := bufio.NewReader(e.c.App.Reader).ReadString('\n')
					if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
						return errors.New("not shown")
					}
				}
				e.out(map[string]any{"words": words}, "%s", strings.Join(words, " "))
				return nil
			}),
		},
		{
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
			Action: withSeat(func(e *env, s *seat.Seat) error {
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
				email, org, invite := e.c.String("email"), e.c.String("org"), e.c.String("org-invite")
				key, err := apiKeyFlag(e)
				if err != nil {
					return err
				}
				if key != "" {
					if invite != "" || org != "" || e.c.String("signup-token") != "" {
						return badUsage("--api-key takes an account that exists", "tally signin --api-key KEY, without --org, --org-invite or --signup-token")
					}
					a, err := signinAPIKey(e, s, key)
					if err != nil {
						return err
					}
					e.out(map[string]string{"account_id": a.AccountID, "org": a.Org}, "signed in: org %s (account %s)", safe(a.Org), a.AccountID)
					return nil
				}
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
			}),
		},
		{
			Name:  "connect",
			Usage: "register this seat and its sync channel",
			Action: withSeat(func(e *env, s *seat.Seat) error {
				ch, err := s.Connect(e.c.Context)
				if err != nil {
					return err
				}
				e.out(map[string]string{"channel": ch}, "connected: sync channel %s", ch)
				return nil
			}),
		},
		{
			Name:      "add",
			Usage:     "append to the local log",
			ArgsUsage: "TEXT…",
			Action: withSeat(func(e *env, s *seat.Seat) error {
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
			}),
		},
		{
			Name:  "log",
			Usage: "print the local log",
			Action: withSeat(func(e *env, s *seat.Seat) error {
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
			}),
		},
		{
			Name:  "push",
			Usage: "seal and publish new log entries",
			Action: withSeat(func(e *env, s *seat.Seat) error {
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
			}),
		},
		{
			Name:  "pull",
			Usage: "fetch and merge log entries from the relay",
			Action: withSeat(func(e *env, s *seat.Seat) error {
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
			}),
		},
		whoamiCommand(),
		configCommand(),
		devicesCommand(),
		orgCommand(),
		contactCommand(),
	}
}

func orgCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "org",
		Usage: "invite new accounts into this account's org",
		Subcommands: []*ucli.Command{
			{
				Name: "invite", Usage: "mint an org invite for a new account (prints it)",
				Flags: []ucli.Flag{
					usesFlag("accounts may sign up with it"), ttlFlag(),
				},
				Action: withSeat(func(e *env, s *seat.Seat) error {
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
				}),
			},
		},
	}
}

func configCommand() *ucli.Command {
	action := func(f func(e *env, cfg map[string]string) error) ucli.ActionFunc {
		return func(c *ucli.Context) error {
			e, err := newEnv(c)
			if err != nil {
				return err
			}
			cfg, err := e.readConfig()
			if err != nil {
				return err
			}
			return f(e, cfg)
		}
	}
	keys := make([]string, len(settings))
	var about strings.Builder
	for i, st := range settings {
		keys[i] = st.key
		about.WriteString(fmt.Sprintf("\n  %-15s %s (default %s)", st.key, st.about, st.def()))
	}
	checkKey := func(k string) (setting, error) {
		st, ok := settingNamed(k)
		if !ok {
			return st, &usageError{fmt.Sprintf("unknown setting %q", k), "settings are " + strings.Join(keys, ", ")}
		}
		return st, nil
	}
	return &ucli.Command{
		Name:  "config",
		Usage: "read and change this home's settings",
		Description: "Settings live in the home's database. A flag beats the environment, which beats a setting.\n" +
			"Settings:" + about.String(),
		Subcommands: []*ucli.Command{
			{
				Name: "set", Usage: "change a setting", ArgsUsage: "KEY VALUE",
				Description: "Settings:" + about.String(),
				Action: action(func(e *env, cfg map[string]string) error {
					if e.c.NArg() != 2 {
						return badUsage("want a key and a value", "tally config set KEY VALUE")
					}
					k, v := e.c.Args().Get(0), e.c.Args().Get(1)
					if _, err := checkKey(k); err != nil {
						return err
					}
					switch k {
					case "api_url", "relay_url":
						if err := seat.CheckURL(v); err != nil {
							return err
						}
					case "cover_interval":
						if _, err := parseCoverInterval(v); err != nil {
							return err
						}
					case "cover_traffic":
						if v != "on" && v != "off" {
							return badUsage("cover_traffic is on or off", "")
						}
					case seat.SettingName:
						if seat.CheckName(v) != nil {
							return &usageError{fmt.Sprintf("%q is not a name tally can show", v), "a name is 1 to 64 printable characters, without spaces at either end"}
						}
					}
					if err := seat.SetSetting(e.c.Context, e.home, k, v); err != nil {
						return err
					}
					e.out(map[string]string{"key": k, "value": v}, "%s = %s", k, v)
					return nil
				}),
			},
			{
				Name: "get", Usage: "print a setting's value (its default when it is not set)", ArgsUsage: "KEY",
				Description: "Settings:" + about.String(),
				Action: action(func(e *env, cfg map[string]string) error {
					if e.c.NArg() != 1 {
						return badUsage("want a key", "tally config get KEY; settings are "+strings.Join(keys, ", "))
					}
					st, err := checkKey(e.c.Args().First())
					if err != nil {
						return err
					}
					v, set := cfg[st.key]
					if !set {
						v = st.def()
					}
					e.out(map[string]any{"key": st.key, "value": v, "default": !set}, "%s", v)
					return nil
				}),
			},
			{
				Name: "list", Usage: "print every setting, marking those left at their default",
				Action: action(func(e *env, cfg map[string]string) error {
					if e.json {
						list := []map[string]any{}
						for _, st := range settings {
							v, set := cfg[st.key]
							if !set {
								v = st.def()
							}
							list = append(list, map[string]any{"key": st.key, "value": v, "default": !set})
						}
						e.out(list, "")
						return nil
					}
					for _, st := range settings {
						if v, set := cfg[st.key]; set {
							showf(e.c.App.Writer, "%s = %s\n", st.key, v)
						} else if d := st.def(); d != "" {
							showf(e.c.App.Writer, "%s = %s  (default)\n", st.key, d)
						} else {
							showf(e.c.App.Writer, "%s is not set\n", st.key)
						}
					}
					return nil
				}),
			},
		},
	}
}

// parseCoverInterval reads the cover_interval setting.
func parseCoverInterval(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, &usageError{fmt.Sprintf("cover_interval %q is not a duration of at least 1s", v), "for example: tally config set cover_interval 30s"}
	}
	return d, nil
}
