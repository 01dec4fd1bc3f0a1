package relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (server *net.TCPConn, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); client.Close() })
	return s.(*net.TCPConn), client
}

// wrapped is a listener's connection that wraps another byte for byte.
type wrapped struct{ net.Conn }

func (w wrapped) Inner() net.Conn { return w.Conn }

// TestIdleReaderReadsTheSameBytes: whatever the peer writes, in whatever
// pieces, the reader returns the same bytes in order, for reads of every
// size through the library's small bufio.Reader, and holds no buffer once
// it has handed every byte on; the bytes the upgrade's reader had already
// taken come first.
func TestIdleReaderReadsTheSameBytes(t *testing.T) {
	server, client := tcpPair(t)
	up := bufio.NewReader(wrapped{server})
	client.Write([]byte("pipelined"))
	if _, err := up.Peek(len("pipelined")); err != nil {
		t.Fatal(err)
	}
	br, ir := idleSocket(t, wrapped{server}, up)
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	go func() {
		rest := want
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(9000))
			client.Write(rest[:n])
			rest = rest[n:]
		}
	}()
	got := make([]byte, len("pipelined"))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "pipelined" {
		t.Fatalf("first bytes %q, %v", got, err)
	}
	got = got[:0]
	rrng := rand.New(rand.NewPCG(3, 4))
	for len(got) < len(want) {
		p := make([]byte, min(len(want)-len(got), 1+rrng.IntN(10000)))
		if rrng.IntN(4) == 0 {
			b, err := br.ReadByte()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b)
			continue
		}
		n, err := io.ReadFull(br, p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from the bytes written")
	}
	if br.Buffered() == 0 && ir.buf != nil {
		t.Fatal("every byte is taken and the reader still holds a buffer")
	}
}

// TestIdleReaderEnds: the peer's close is io.EOF, a read deadline that
// passes is os.ErrDeadlineExceeded (holding no buffer), and a read on a
// closed socket is net.ErrClosed.
func TestIdleReaderEnds(t *testing.T) {
	server, client := tcpPair(t)
	br, ir := idleSocket(t, server, bufio.NewReader(server))
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := br.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) || ir.buf != nil {
		t.Fatalf("past the deadline: %v (holding a buffer: %v)", err, ir.buf != nil)
	}
	server.SetReadDeadline(time.Time{})
	client.Write([]byte("x"))
	client.Close()
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("the last byte: %q %v", b, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the peer's close: %v", err)
	}
	s2, _ := tcpPair(t)
	br2, _ := idleSocket(t, s2, bufio.NewReader(s2))
	s2.Close()
	if _, err := br2.ReadByte(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("on a closed socket: %v", err)
	}
	// A peer that resets the connection (a close with unread bytes and
	// no linger sends RST) is an error of no bytes.
	s3, c3 := tcpPair(t)
	br3, _ := idleSocket(t, s3, bufio.NewReader(s3))
	s3.Write([]byte("unread"))
	c3.(*net.TCPConn).SetLinger(0)
	time.Sleep(20 * time.Millisecond) // time for the bytes to reach the peer, so its close resets
	c3.Close()
	if n, err := br3.Read(make([]byte, 64)); n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after a reset: %d, %v", n, err)
	}
}

// TestIdleReaderOnlyOnPlainTCP: a connection that is not plain TCP (a
// pipe, as TLS or an embedder's wrapper would be) keeps the upgrade's
// reader.
func TestIdleReaderOnlyOnPlainTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if idleFor(a, bufio.NewReader(a)) != nil {
		t.Fatal("a pipe got the idle reader")
	}
}

// idleSocket reads nc the way the WebSocket library does after Hijack: a
// bufio.Reader of the smallest size, reset to read the frameConn, whose
// idle reader holds what the upgrade's reader up had buffered.
func idleSocket(t *testing.T, nc net.Conn, up *bufio.Reader) (*bufio.Reader, *idleReader) {
	t.Helper()
	ir := idleFor(nc, up)
	if ir == nil {
		t.Fatal("a plain TCP socket got no idle reader")
	}
	fc := &frameConn{Conn: nc, idle: ir}
	br := bufio.NewReaderSize(fc, minBufio)
	b, _ := br.Peek(br.Buffered())
	br.Reset(io.MultiReader(bytes.NewReader(b), fc))
	return br, ir
}

// TestIdleReaderWakesForEveryArrival: a read that finds the socket empty
// waits for the next bytes and returns them, however close their arrival
// is to the empty read (a wait that cleared the poller's readiness would
// sleep through them, until the deadline). Many sockets echo one byte at
// a time at once, so arrivals land at every point of the reads.
func TestIdleReaderWakesForEveryArrival(t *testing.T) {
	const sockets, rounds = 16, 400
	errs := make(chan error, sockets)
	for range sockets {
		server, client := tcpPair(t)
		br, _ := idleSocket(t, server, bufio.NewReader(server))
		go func() {
			one := make([]byte, 1)
			for {
				if _, err := io.ReadFull(client, one); err != nil {
					return
				}
				client.Write(one)
			}
		}()
		go func() {
			for i := range rounds {
				server.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := server.Write([]byte{byte(i)}); err != nil {
					errs <- err
					return
				}
				if b, err := br.ReadByte(); err != nil || b != byte(i) {
					errs <- fmt.Errorf("round %d: %v %v", i, b, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range sockets {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
