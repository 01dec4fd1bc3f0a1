package cli

import (
	"time"

	ucli "github.com/urfave/cli/v2"
)

// The invites, org invites and add-tokens a person mints all take how
// many times they may be used and how long they are valid, with the
// directory's ranges and defaults.

// usesFlag is --uses, for a token that lets "how many <allows>".
func usesFlag(allows string) ucli.Flag {
	return &ucli.IntFlag{Name: "uses", Usage: "how many " + allows + ", 1 to 100", DefaultText: "1"}
}

// ttlFlag is --ttl. Each command gets a flag of its own: a flag holds
// what it parsed.
func ttlFlag() ucli.Flag {
	return &ucli.DurationFlag{Name: "ttl", Usage: "how long it is valid, 1m to 168h", DefaultText: "1h"}
}

// usesTTL reads --uses and --ttl; zero means the directory's default.
func (e *env) usesTTL() (int, time.Duration, error) {
	uses, ttl := e.c.Int("uses"), e.c.Duration("ttl")
	if uses < 0 || ttl < 0 || (ttl > 0 && ttl < time.Second) {
		return 0, 0, badUsage("--uses and --ttl must be positive", "for example --uses 3 --ttl 24h")
	}
	return uses, ttl, nil
}
