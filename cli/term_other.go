//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package cli

import (
	"errors"
	"os"
)

func echoOff(*os.File) (func(), error) {
	return nil, errors.New("cannot turn off terminal echo here")
}

// isTerminal reports false: asking at a terminal is not supported here,
// so questions need their answer as a flag.
func isTerminal(any) bool { return false }
