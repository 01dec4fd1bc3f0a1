package cli

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/cover"
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
	{"cover_lifetime", "off, or the mean life of a watch's connection, e.g. 3m: a msg with no watch running then waits on such a connection, among cover", func() string { return "off" }},
	{seat.SettingName, "the name your rooms show beside your key's short form (1 to 64 printable characters)", func() string { return "" }},
}

// settingNamed is the setting of key k, if tally has one.
func settingNamed(k string) (setting, bool) {
	for _, s := range settings {
		if s.key == k {
			return s, true
		}
	}
	return setting{}, false
}

// settingKeys are the keys of the settings, in their order.
func settingKeys() []string {
	keys := make([]string, len(settings))
	for i, st := range settings {
		keys[i] = st.key
	}
	return keys
}

// settingsHelp is the list of the settings that the config commands'
// help shows, one line each with its default.
func settingsHelp() string {
	var about strings.Builder
	for _, st := range settings {
		about.WriteString(fmt.Sprintf("\n  %-15s %s (default %s)", st.key, st.about, st.def()))
	}
	return "Settings:" + about.String()
}

// checkSettingKey is the setting of key k, or a usage error naming the
// keys there are.
func checkSettingKey(k string) (setting, error) {
	st, ok := settingNamed(k)
	if !ok {
		return st, &usageError{fmt.Sprintf("unknown setting %q", k), "settings are " + strings.Join(settingKeys(), ", ")}
	}
	return st, nil
}

// configAction runs f with the home's settings, without opening its seat
// (a home with no seed has settings too).
func configAction(f func(e *env, cfg map[string]string) error) ucli.ActionFunc {
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

// configCommand is `tally config`.
func configCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "config",
		Usage: "read and change this home's settings",
		Description: "Settings live in the home's database. A flag beats the environment, which beats a setting.\n" +
			settingsHelp(),
		Subcommands: []*ucli.Command{
			{
				Name: "set", Usage: "change a setting", ArgsUsage: "KEY VALUE",
				Description: settingsHelp(),
				Action:      configAction(runConfigSet),
			},
			{
				Name: "get", Usage: "print a setting's value (its default when it is not set)", ArgsUsage: "KEY",
				Description: settingsHelp(),
				Action:      configAction(runConfigGet),
			},
			{
				Name: "list", Usage: "print every setting, marking those left at their default",
				Action: configAction(runConfigList),
			},
		},
	}
}

// parseCoverLifetime reads the cover_lifetime setting: off (zero) or a
// duration of at least 1s.
func parseCoverLifetime(v string) (time.Duration, error) {
	if v == "off" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, &usageError{fmt.Sprintf("cover_lifetime %q is not off or a duration of at least 1s", v), "for example: tally config set cover_lifetime 3m"}
	}
	return d, nil
}

// runConfigSet runs `tally config set KEY VALUE`: the value is checked
// as the setting needs before it is kept.
func runConfigSet(e *env, _ map[string]string) error {
	if e.c.NArg() != 2 {
		return badUsage("want a key and a value", "tally config set KEY VALUE")
	}
	k, v := e.c.Args().Get(0), e.c.Args().Get(1)
	if _, err := checkSettingKey(k); err != nil {
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
	case "cover_lifetime":
		if _, err := parseCoverLifetime(v); err != nil {
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
}

// runConfigGet runs `tally config get KEY`.
func runConfigGet(e *env, cfg map[string]string) error {
	if e.c.NArg() != 1 {
		return badUsage("want a key", "tally config get KEY; settings are "+strings.Join(settingKeys(), ", "))
	}
	st, err := checkSettingKey(e.c.Args().First())
	if err != nil {
		return err
	}
	v, set := cfg[st.key]
	if !set {
		v = st.def()
	}
	e.out(map[string]any{"key": st.key, "value": v, "default": !set}, "%s", v)
	return nil
}

// runConfigList runs `tally config list`.
func runConfigList(e *env, cfg map[string]string) error {
	if e.json {
		list := []map[string]any{}
		for _, st := range settings {
			v, set := cfg[st.key]
			if !set {
				v = st.def()
			}
			list = append(list, map[string]any{"key": st.key, "value": v, "default": !set})
		}
		e.out(map[string]any{"settings": list}, "")
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
}

// parseCoverInterval reads the cover_interval setting.
func parseCoverInterval(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, &usageError{fmt.Sprintf("cover_interval %q is not a duration of at least 1s", v), "for example: tally config set cover_interval 30s"}
	}
	return d, nil
}
