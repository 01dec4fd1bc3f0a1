package clientaddr

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The PROXY protocol version 2 header (the HAProxy specification,
// section 2.2): a 12-byte signature, a version and command byte, an
// address family and transport byte, a big-endian length of the rest, the
// addresses, and optional TLVs, which the planes ignore.
const (
	proxySig = "\r\n\r\n\x00\r\nQUIT\n"
	// proxyFixed is the signature and the four bytes after it.
	proxyFixed = 16
	// maxProxyRest bounds the part after the fixed 16 bytes: the largest
	// address block (two UNIX paths, 216 bytes) and room for the TLVs a
	// proxy adds (TLS details, a unique id). A longer header is refused
	// rather than read.
	maxProxyRest = 2048
)

var errProxyHeader = errors.New("clientaddr: not a PROXY protocol v2 header")

// parseProxyFixed checks the fixed 16 bytes of a v2 header and returns
// the length of the rest.
func parseProxyFixed(b []byte) (rest int, err error) {
	if len(b) < proxyFixed || string(b[:12]) != proxySig {
		return 0, errProxyHeader
	}
	if b[12]>>4 != 2 {
		return 0, errors.New("clientaddr: PROXY protocol version is not 2")
	}
	if cmd := b[12] & 0x0f; cmd > 1 {
		return 0, errors.New("clientaddr: unknown PROXY protocol command")
	}
	rest = int(binary.BigEndian.Uint16(b[14:16]))
	if rest > maxProxyRest {
		return 0, errors.New("clientaddr: PROXY protocol header too long")
	}
	return rest, nil
}

// ParseProxyV2 decodes a whole PROXY protocol v2 header (the fixed 16
// bytes and the rest, nothing after). It returns the source address the
// proxy forwarded for, or ok false when the header carries none the
// receiver should use: the LOCAL command (the proxy's own health check),
// or an address family other than TCP over IPv4 or IPv6, for which the
// connection's own peer stands.
func ParseProxyV2(b []byte) (src netip.AddrPort, ok bool, err error) {
	rest, err := parseProxyFixed(b)
	if err != nil {
		return netip.AddrPort{}, false, err
	}
	if len(b) != proxyFixed+rest {
		return netip.AddrPort{}, false, errors.New("clientaddr: PROXY protocol header length does not match")
	}
	body := b[proxyFixed:]
	if b[12]&0x0f == 0 { // LOCAL
		return netip.AddrPort{}, false, nil
	}
	switch b[13] {
	case 0x11: // TCP over IPv4
		if len(body) < 12 {
			return netip.AddrPort{}, false, errors.New("clientaddr: PROXY protocol IPv4 addresses truncated")
		}
		a := netip.AddrFrom4([4]byte(body[0:4]))
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(body[8:10])), true, nil
	case 0x21: // TCP over IPv6
		if len(body) < 36 {
			return netip.AddrPort{}, false, errors.New("clientaddr: PROXY protocol IPv6 addresses truncated")
		}
		a := netip.AddrFrom16([16]byte(body[0:16])).Unmap()
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(body[32:34])), true, nil
	}
	return netip.AddrPort{}, false, nil
}

// readProxyV2 reads a v2 header from r, byte-exact (nothing after it is
// consumed).
func readProxyV2(r io.Reader) (netip.AddrPort, bool, error) {
	var fixed [proxyFixed]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return netip.AddrPort{}, false, err
	}
	rest, err := parseProxyFixed(fixed[:])
	if err != nil {
		return netip.AddrPort{}, false, err
	}
	b := make([]byte, proxyFixed+rest)
	copy(b, fixed[:])
	if _, err := io.ReadFull(r, b[proxyFixed:]); err != nil {
		return netip.AddrPort{}, false, err
	}
	return ParseProxyV2(b)
}

// DefaultHeaderTimeout is how long a trusted proxy has to send its PROXY
// header after connecting (proxies send it at once).
const DefaultHeaderTimeout = 5 * time.Second

// maxPendingHeaders bounds the connections whose PROXY header is being
// read at once.
const maxPendingHeaders = 256

// Listener reads a PROXY protocol v2 header from every connection whose
// peer is in Trusted, and makes the connection's RemoteAddr the source
// address it names. A trusted peer must send the header: a connection
// from one that sends none (or a bad one) within the header timeout is
// closed. Connections from other peers are passed on untouched, their
// RemoteAddr the TCP peer, and a PROXY header they send is just bytes
// the server will refuse.
//
// Headers are read off the accept loop, in a goroutine per connection (at
// most maxPendingHeaders at once), so one slow proxy connection never
// holds up the others.
type Listener struct {
	net.Listener
	trusted []netip.Prefix
	timeout time.Duration

	ready     chan net.Conn
	errs      chan error
	done      chan struct{}
	sem       chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop
}

// NewListener wraps l; timeout 0 means DefaultHeaderTimeout.
func NewListener(l net.Listener, trusted []netip.Prefix, timeout time.Duration) *Listener {
	if timeout <= 0 {
		timeout = DefaultHeaderTimeout
	}
	pl := &Listener{Listener: l, trusted: trusted, timeout: timeout,
		ready: make(chan net.Conn), errs: make(chan error), done: make(chan struct{}),
		sem: make(chan struct{}, maxPendingHeaders)}
	pl.wg.Add(1)
	go pl.acceptLoop()
	return pl
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		peer, ok := Peer(c.RemoteAddr().String())
		if !ok || !Trusted(l.trusted, peer) {
			l.hand(c)
			continue
		}
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			c.Close()
			return
		}
		// Not waited for by Close: the header deadline ends it.
		go func() {
			defer func() { <-l.sem }()
			pc, err := l.header(c)
			if err != nil {
				c.Close()
				return
			}
			l.hand(pc)
		}()
	}
}

// hand passes c to Accept, or closes it once the listener is closed.
func (l *Listener) hand(c net.Conn) {
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}

// header reads c's PROXY header within the timeout.
func (l *Listener) header(c net.Conn) (net.Conn, error) {
	c.SetReadDeadline(time.Now().Add(l.timeout))
	src, ok, err := readProxyV2(c)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, errBadHeader
	}
	if !ok {
		return c, nil
	}
	return &proxyConn{Conn: c, remote: net.TCPAddrFromAddrPort(src)}, nil
}

// Accept returns the next connection whose header, if it owed one, has
// been read.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener; connections not yet accepted are closed.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.wg.Wait()
	})
	return err
}

// proxyConn is a connection whose client is the one its proxy named.
type proxyConn struct {
	net.Conn
	remote net.Addr
}

func (c *proxyConn) RemoteAddr() net.Addr { return c.remote }

// CloseWrite half-closes the TCP connection, as the HTTP server does
// before closing one it answered with an error.
func (c *proxyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
