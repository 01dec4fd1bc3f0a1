// Command tally runs end-to-end encrypted logs and rooms, and serves the
// directory and relay for self-hosting (tally serve).
package main

import (
	"os"

	"github.com/skytale-oss/skytale/cli"
)

func main() {
	os.Exit(cli.Command(os.Args))
}
