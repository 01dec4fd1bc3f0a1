package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"slices"

	ucli "github.com/urfave/cli/v2"
)

// buildInfo describes the running binary: the module version, the commit
// it was built from and the Go version.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go"`
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func versionString() string {
	b := readBuildInfo()
	s := b.Version
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (commit " + c
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	if b.GoVersion != "" {
		s += " " + b.GoVersion
	}
	return s
}

// docApp is a fresh command tree for the generated documents: one that
// has not run, so it holds no help commands of its own making.
func docApp() *ucli.App {
	app := newApp(nil, io.Discard, io.Discard)
	withoutGlobalFlags(app.Commands)
	return app
}

// withoutGlobalFlags drops the global flags from cmds, for documents that
// list them once, under the app.
func withoutGlobalFlags(cmds []*ucli.Command) {
	for _, c := range cmds {
		c.Flags = slices.DeleteFunc(c.Flags, func(f ucli.Flag) bool {
			cf, ok := f.(ucli.CategorizableFlag)
			return ok && cf.GetCategory() == globalCategory
		})
		withoutGlobalFlags(c.Subcommands)
	}
}

// infoCommands are the commands about tally itself.
func infoCommands() []*ucli.Command {
	return []*ucli.Command{
		{
			Name:  "version",
			Usage: "print the version, the commit it was built from and the Go version",
			Action: func(c *ucli.Context) error {
				b := readBuildInfo()
				if globalBool(c, "json") {
					return jsonLine(c, b)
				}
				showf(c.App.Writer, "tally %s\n", versionString())
				return nil
			},
		},
		{
			Name:      "completion",
			Usage:     "print a shell completion script",
			ArgsUsage: "bash|zsh|fish",
			Description: "Load it in your shell's start-up file, for example:\n" +
				"  bash: source <(tally completion bash)\n" +
				"  zsh:  source <(tally completion zsh)\n" +
				"  fish: tally completion fish | source",
			Action: func(c *ucli.Context) error {
				if c.NArg() != 1 {
					return badUsage("want a shell", "tally completion bash|zsh|fish")
				}
				switch sh := c.Args().First(); sh {
				case "bash":
					io.WriteString(c.App.Writer, bashCompletion)
				case "zsh":
					io.WriteString(c.App.Writer, zshCompletion)
				case "fish":
					s, err := docApp().ToFishCompletion()
					if err != nil {
						return err
					}
					io.WriteString(c.App.Writer, s)
				default:
					return badUsage(fmt.Sprintf("no completion for the shell %q", sh), "tally completion bash|zsh|fish")
				}
				return nil
			},
		},
		{
			Name:        "man",
			Usage:       "print the manual page (roff), generated from the command tree",
			Description: "For example: tally man > tally.1 && man ./tally.1",
			Action: func(c *ucli.Context) error {
				s, err := docApp().ToManWithSection(1)
				if err != nil {
					return err
				}
				io.WriteString(c.App.Writer, s)
				return nil
			},
		},
	}
}

// The bash and zsh scripts ask tally itself for the words that may come
// next (urfave/cli's --generate-bash-completion), so they follow the
// command tree without being regenerated.
const bashCompletion = `# bash completion for tally
_tally_complete() {
	local cur words
	cur="${COMP_WORDS[COMP_CWORD]}"
	if [[ "$cur" == -* ]]; then
		words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:$COMP_CWORD-1}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:$COMP_CWORD-1}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o bashdefault -o default -F _tally_complete tally
`

const zshCompletion = `#compdef tally
# zsh completion for tally
_tally() {
	local -a opts
	local cur="${words[-1]}"
	if [[ "$cur" == -* ]]; then
		opts=("${(@f)$(${words[1]} ${words[@]:1:#words[@]-2} $cur --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[1]} ${words[@]:1:#words[@]-2} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
if [[ "$(basename -- ${(%):-%x})" != "_tally" ]]; then
	compdef _tally tally
fi
`
