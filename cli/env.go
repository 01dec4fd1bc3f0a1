package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/seat"
)

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

// newEnv is the environment of the command c is the context of.
func newEnv(c *ucli.Context) (*env, error) {
	home, err := homeFolder(globalString(c, "home"))
	if err != nil {
		return nil, err
	}
	return &env{c: c, home: home, json: globalBool(c, "json"), verbose: globalBool(c, "verbose")}, nil
}

// homeFolder is the seat's folder: flag (--home) when it is set, else
// $TALLY_HOME, else ~/.tally.
func homeFolder(flag string) (string, error) {
	home := flag
	if home == "" {
		home = getenv(nil, "TALLY_HOME")
	}
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", badUsage("no home folder", "pass --home DIR or set TALLY_HOME")
		}
		home = filepath.Join(h, ".tally")
	}
	return home, nil
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
	if v := cfg["cover_lifetime"]; v != "" {
		if sc.Cover.MeanLifetime, err = parseCoverLifetime(v); err != nil {
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

func jsonLine(c *ucli.Context, v any) error {
	e := &env{c: c, json: true}
	e.out(v, "")
	return nil
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

// plural is n followed by the singular or plural of a noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
