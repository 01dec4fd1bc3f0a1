package cli

import (
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"
)

// completionCommand is `tally completion`.
func completionCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script",
		ArgsUsage: "bash|zsh|fish",
		Description: "Load it in your shell's start-up file, for example:\n" +
			"  bash: source <(tally completion bash)\n" +
			"  zsh:  source <(tally completion zsh)\n" +
			"  fish: tally completion fish | source",
		Action: runCompletion,
	}
}

// runCompletion runs `tally completion SHELL`.
func runCompletion(c *ucli.Context) error {
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
