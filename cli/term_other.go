//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package cli

import (
	"errors"
	"os"
)

func echoOff(*os.File) (func(), error) {
	return nil, errors.New("cannot turn off terminal echo here")
}
