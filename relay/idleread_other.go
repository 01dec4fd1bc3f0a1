//go:build !linux

package relay

import (
	"errors"
	"net"
)

// idleBufSize bounds the bytes an upgrade may leave for the idle reader.
const idleBufSize = 4 << 10

// idleReader is Linux's (idleread_linux.go); elsewhere the upgrade's
// reader is kept.
type idleReader struct{}

func newIdleReader(*net.TCPConn) (*idleReader, error) {
	return nil, errors.New("relay: no idle reader on this platform")
}

func (*idleReader) stash([]byte) {}

func (*idleReader) Read([]byte) (int, error) { return 0, errors.New("relay: no idle reader") }
