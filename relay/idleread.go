package relay

import (
	"bufio"
	"net"
)

// An idle socket holds no read buffer.
//
// The WebSocket library reads through the bufio.Reader the upgrade's
// Hijack returns (it resets it to read the returned connection, the bytes
// it holds first), keeping its buffer for the socket's whole life, idle or
// not: 4 KiB from net/http, with tens of thousands of subscribers that
// mostly listen the largest part of what a socket costs. Where the socket
// is a plain TCP connection (directly or under this module's listeners,
// whose Inner gives it), Hijack returns a bufio.Reader of the smallest
// size instead, and the frameConn under it reads through an idleReader:
// that waits for the socket to become readable holding nothing, reads
// what is there into a pooled buffer, and gives the buffer back once the
// library has taken every byte (idleread_linux.go). Elsewhere (TLS in the
// process, another platform, a listener of the embedder's that wraps the
// connection) the upgrade's reader is kept.

// innerConn is a connection that wraps another without buffering or
// changing its bytes: httpx's counted connections and clientaddr's PROXY
// connections.
type innerConn interface{ Inner() net.Conn }

// plainTCP returns the TCP connection nc is, or wraps byte for byte, or
// nil.
func plainTCP(nc net.Conn) *net.TCPConn {
	for range 8 {
		switch c := nc.(type) {
		case *net.TCPConn:
			return c
		case innerConn:
			nc = c.Inner()
		default:
			return nil
		}
	}
	return nil
}

// minBufio is the smallest bufio.Reader; the library reads at most a
// frame header (14 bytes) through its buffer, and larger reads pass it.
const minBufio = 16

// idleFor is the idleReader for the socket nc, whose upgrade left br
// (which may hold bytes the client sent after its request: they are read
// first), or nil where the upgrade's reader is kept.
func idleFor(nc net.Conn, br *bufio.Reader) *idleReader {
	tc := plainTCP(nc)
	if tc == nil || br.Buffered() > idleBufSize {
		return nil
	}
	ir, err := newIdleReader(tc)
	if err != nil {
		return nil
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		ir.stash(b)
	}
	return ir
}
