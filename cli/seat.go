package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// seatCommands are the commands of a seat: its seed, account, log,
// settings, devices, org and contacts.
func seatCommands() []*ucli.Command {
	return []*ucli.Command{
		initCommand(),
		phraseCommand(),
		signinCommand(),
		connectCommand(),
		addCommand(),
		logCommand(),
		pushCommand(),
		pullCommand(),
		whoamiCommand(),
		configCommand(),
		devicesCommand(),
		orgCommand(),
		contactCommand(),
	}
}

// initCommand is `tally init`.
func initCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "init",
		Usage:  "create the seed (prints the identity, never the words)",
		Flags:  []ucli.Flag{&ucli.StringFlag{Name: "name", Usage: "the name your rooms show beside your key's short form (tally config set name changes it later)"}},
		Action: withSeat(runInit),
	}
}

// runInit runs `tally init`.
func runInit(e *env, s *seat.Seat) error {
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
}

// phraseCommand is `tally backup`, which shows the 24 words.
func phraseCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "backup",
		Usage:  "show the 24 words",
		Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "yes", Usage: "do not ask for confirmation"}},
		Action: withSeat(runPhrase),
	}
}

// runPhrase runs `tally backup`.
func runPhrase(e *env, s *seat.Seat) error {
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
}
