package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	ucli "github.com/urfave/cli/v2"
)

// The settings of tally serve come from three places. A flag beats the
// environment, which beats the config file (--config FILE, TOML). Every
// flag of tally serve has a key, its name with '_' for '-'
// (api_addr = "127.0.0.1:3100"), and an environment variable,
// TALLY_SERVE_ and the key in capitals (TALLY_SERVE_API_ADDR): the seat's
// variables are TALLY_* too, and a client's TALLY_RELAY_URL must not
// become a directory's --relay-url; a key the file has and serve does
// not is an error that names it, so a typo never goes unnoticed. A list
// flag takes a TOML array or a comma-separated string.

// configEnvPrefix is the prefix of the environment variables of serve's
// settings.
const configEnvPrefix = "TALLY_SERVE_"

// configFlagName is the flag of serve's settings that names the file.
const configFlagName = "config"

// configFlag is a new --config flag (flags keep state as they parse, so
// each command gets its own).
func configFlag() ucli.Flag {
	return &ucli.StringFlag{Name: configFlagName, Usage: "read settings from this TOML `FILE`: every flag has a key, its name with _ for - (flags beat TALLY_SERVE_* environment variables, which beat the file); see tally serve check-config"}
}

// applyServeConfig sets every flag of c's command that the command line
// did not set from the environment or from the config file c names (or
// path, when not empty).
func applyServeConfig(c *ucli.Context, cmd *ucli.Command, path string) error {
	_, err := configSources(c, cmd, path)
	return err
}

// configSources is applyServeConfig, and says where each setting came
// from: by config key, "flag", the environment variable's name, or the
// file's path; a key it does not hold keeps its default.
func configSources(c *ucli.Context, cmd *ucli.Command, path string) (map[string]string, error) {
	from := map[string]string{}
	if path == "" {
		path = c.String("config")
	}
	file := map[string]any{}
	if path != "" {
		if _, err := toml.DecodeFile(path, &file); err != nil {
			return nil, badUsage("the config file "+path+" is not valid TOML", err.Error())
		}
	}
	known := map[string]ucli.Flag{}
	for _, f := range cmd.Flags {
		name := f.Names()[0]
		if name == "help" || name == configFlagName {
			continue
		}
		known[configKey(name)] = f
	}
	var unknown []string
	for k := range file {
		if _, ok := known[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, badUsage(fmt.Sprintf("the config file %s has keys tally serve does not know: %s", path, strings.Join(unknown, ", ")),
			"each key is a flag's name with _ for - (see tally serve --help)")
	}
	keys := make([]string, 0, len(known))
	for k := range known {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := known[k]
		name := f.Names()[0]
		if c.IsSet(name) {
			from[k] = "flag"
			continue
		}
		if v, ok := os.LookupEnv(configEnvPrefix + strings.ToUpper(k)); ok {
			if err := setFlag(c, name, []string{v}); err != nil {
				return nil, badUsage(fmt.Sprintf("%s%s=%q: %v", configEnvPrefix, strings.ToUpper(k), v, err), "")
			}
			from[k] = configEnvPrefix + strings.ToUpper(k)
			continue
		}
		v, ok := file[k]
		if !ok {
			continue
		}
		vals, err := configValues(v)
		if err != nil {
			return nil, badUsage(fmt.Sprintf("%s in %s: %v", k, path, err), "")
		}
		if err := setFlag(c, name, vals); err != nil {
			return nil, badUsage(fmt.Sprintf("%s in %s: %v", k, path, err), "")
		}
		from[k] = path
	}
	return from, nil
}

// configKey is the config file's key of the flag name.
func configKey(name string) string { return strings.ReplaceAll(name, "-", "_") }

// configValues turns a TOML value into the flag values it stands for.
func configValues(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case bool:
		return []string{strconv.FormatBool(v)}, nil
	case int64:
		return []string{strconv.FormatInt(v, 10)}, nil
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}, nil
	case []any:
		var out []string
		for _, x := range v {
			s, err := configValues(x)
			if err != nil || len(s) != 1 {
				return nil, errors.New("a list holds only strings, numbers and booleans")
			}
			out = append(out, s...)
		}
		return []string{strings.Join(out, ",")}, nil
	case time.Time:
		return nil, errors.New("a date is no setting of tally serve; give a string")
	}
	return nil, fmt.Errorf("a %T is no setting of tally serve", v)
}

// setFlag sets the flag name of c to vals, refusing what the flag would.
func setFlag(c *ucli.Context, name string, vals []string) error {
	for _, v := range vals {
		if err := c.Set(name, v); err != nil {
			return err
		}
	}
	return nil
}

// checkConfigCommand is `tally serve check-config`: what serve would run
// with, without starting anything.
func checkConfigCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "check-config",
		Usage: "check the settings tally serve would start with (its flags, TALLY_SERVE_* and --config FILE) without starting it, and list them",
		Description: "Prints every setting as a line of a config file, with where it came from\n" +
			"(flag, the environment variable, the file, or the default).",
		Flags: []ucli.Flag{configFlag()},
		Action: func(c *ucli.Context) error {
			parent := c.Lineage()[1]
			from, err := configSources(parent, parent.Command, c.String("config"))
			if err != nil {
				return err
			}
			o, err := serveOptionsFrom(parent)
			if err != nil {
				return err
			}
			showf(c.App.Writer, "the settings are valid\n")
			for _, f := range parent.Command.Flags {
				name := f.Names()[0]
				if name == "help" || name == configFlagName {
					continue
				}
				showf(c.App.Writer, "%s\n", configLine(f, configKey(name), parent.Value(name), from))
			}
			showf(c.App.Writer, "# in effect: signup %s\n", o.signupMode())
			return nil
		},
	}
}

// configLine is one setting as check-config lists it. A setting left at a
// default that depends on others (its help gives the default as text, like
// signup's "open when both planes listen on loopback") is a comment naming
// that default, not the flag's zero value, which serve would not use.
func configLine(f ucli.Flag, key string, v any, from map[string]string) string {
	if src := from[key]; src != "" {
		return fmt.Sprintf("%s = %s  # %s", key, tomlValue(v), src)
	}
	if d := defaultText(f); d != "" {
		return fmt.Sprintf("# %s: default, %s", key, d)
	}
	return fmt.Sprintf("%s = %s  # default", key, tomlValue(v))
}

// defaultText is the default a flag's help states as text, if it has one.
func defaultText(f ucli.Flag) string {
	switch f := f.(type) {
	case *ucli.StringFlag:
		return f.DefaultText
	case *ucli.BoolFlag:
		return f.DefaultText
	case *ucli.IntFlag:
		return f.DefaultText
	case *ucli.DurationFlag:
		return f.DefaultText
	}
	return ""
}

// tomlValue is a flag's value as a config file writes it.
func tomlValue(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Duration:
		return strconv.Quote(v.String())
	case ucli.StringSlice:
		return strconv.Quote(strings.Join(v.Value(), ","))
	}
	return strconv.Quote(fmt.Sprint(v))
}
