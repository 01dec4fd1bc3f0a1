// Command tally runs end-to-end encrypted logs and rooms, and serves the
// directory and relay for self-hosting (tally serve).
package main

import (
	"context"
	"os"

	"github.com/skytale-oss/skytale/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
}
