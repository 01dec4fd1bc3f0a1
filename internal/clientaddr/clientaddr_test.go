package clientaddr

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func mustPrefixes(t testing.TB, s string) []netip.Prefix {
	t.Helper()
	p, err := ParsePrefixes(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParsePrefixes(t *testing.T) {
	p := mustPrefixes(t, " 10.0.0.0/8, 127.0.0.1 ,::1,2001:db8::/32,")
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "::1/128", "2001:db8::/32"}
	if len(p) != len(want) {
		t.Fatalf("%v", p)
	}
	for i := range want {
		if p[i].String() != want[i] {
			t.Fatalf("%v, want %v", p, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := ParsePrefixes(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// TestOf: the client is the TCP peer unless the peer is trusted; then it
// is the rightmost X-Forwarded-For entry that is not a trusted proxy, so
// a client cannot choose its address by writing the header itself.
func TestOf(t *testing.T) {
	trusted := mustPrefixes(t, "127.0.0.1,10.0.0.0/8")
	for _, c := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"198.51.100.7:1234", []string{"203.0.113.1"}, "198.51.100.7"}, // untrusted peer: header ignored
		{"127.0.0.1:1234", nil, "127.0.0.1"},
		{"127.0.0.1:1234", []string{"203.0.113.1"}, "203.0.113.1"},
		{"127.0.0.1:1234", []string{"6.6.6.6, 203.0.113.1"}, "203.0.113.1"}, // the client wrote 6.6.6.6
		{"127.0.0.1:1234", []string{"6.6.6.6", "203.0.113.1, 10.1.2.3"}, "203.0.113.1"},
		{"127.0.0.1:1234", []string{"10.9.9.9, 10.1.2.3"}, "10.9.9.9"}, // all trusted: the farthest
		{"127.0.0.1:1234", []string{"6.6.6.6, garbage"}, "127.0.0.1"},
		{"127.0.0.1:1234", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"127.0.0.1:1234", []string{"::ffff:203.0.113.5"}, "203.0.113.5"},
		{"[::ffff:127.0.0.1]:1234", []string{"203.0.113.1"}, "203.0.113.1"},
		{"127.0.0.1:1234", []string{" , 203.0.113.1 ,"}, "203.0.113.1"},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, ok := Of(r, trusted)
		if !ok || got.String() != c.want {
			t.Errorf("%s %q: %v %v, want %s", c.remote, c.xff, got, ok, c.want)
		}
	}
	// Without trusted proxies the header never counts.
	r := &http.Request{RemoteAddr: "127.0.0.1:1", Header: http.Header{"X-Forwarded-For": {"203.0.113.1"}}}
	if got, _ := Of(r, nil); got.String() != "127.0.0.1" {
		t.Fatalf("no trusted proxies: %v", got)
	}
}

func TestKeys(t *testing.T) {
	for _, c := range []struct{ addr, net string }{
		{"192.0.2.77", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.0/24"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
	} {
		k := KeysOf(netip.MustParseAddr(c.addr))
		if k.Net.String() != c.net || k.Addr != netip.MustParseAddr(c.addr).Unmap() {
			t.Errorf("%s: %+v, want net %s", c.addr, k, c.net)
		}
	}
}

// proxyHeader builds a v2 header for a TCP connection from src to dst,
// with tlv bytes after the addresses.
func proxyHeader(cmd byte, src, dst netip.AddrPort, tlv []byte) []byte {
	b := []byte(proxySig)
	b = append(b, 0x20|cmd)
	var addrs []byte
	if src.Addr().Is4() {
		b = append(b, 0x11)
		s, d := src.Addr().As4(), dst.Addr().As4()
		addrs = append(append(addrs, s[:]...), d[:]...)
	} else {
		b = append(b, 0x21)
		s, d := src.Addr().As16(), dst.Addr().As16()
		addrs = append(append(addrs, s[:]...), d[:]...)
	}
	addrs = binary.BigEndian.AppendUint16(addrs, src.Port())
	addrs = binary.BigEndian.AppendUint16(addrs, dst.Port())
	addrs = append(addrs, tlv...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return append(b, addrs...)
}

func TestParseProxyV2(t *testing.T) {
	src4, dst4 := netip.MustParseAddrPort("203.0.113.9:5555"), netip.MustParseAddrPort("192.0.2.1:443")
	src6, dst6 := netip.MustParseAddrPort("[2001:db8::9]:5555"), netip.MustParseAddrPort("[2001:db8::1]:443")
	if a, ok, err := ParseProxyV2(proxyHeader(1, src4, dst4, nil)); err != nil || !ok || a != src4 {
		t.Fatalf("v4: %v %v %v", a, ok, err)
	}
	if a, ok, err := ParseProxyV2(proxyHeader(1, src6, dst6, []byte{0x04, 0, 1, 'x'})); err != nil || !ok || a != src6 {
		t.Fatalf("v6 with a TLV: %v %v %v", a, ok, err)
	}
	if _, ok, err := ParseProxyV2(proxyHeader(0, src4, dst4, nil)); err != nil || ok {
		t.Fatalf("LOCAL: %v %v", ok, err)
	}
	good := proxyHeader(1, src4, dst4, nil)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"signature": append([]byte("GET / HTTP/1.1\r\n"), good[16:]...),
		"version":   append(append(append([]byte{}, good[:12]...), 0x11), good[13:]...),
		"command":   append(append(append([]byte{}, good[:12]...), 0x22), good[13:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
		"short v4":  append(append(append([]byte{}, good[:14]...), 0, 4), good[16:20]...),
	} {
		if _, _, err := ParseProxyV2(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	long := append([]byte(proxySig), 0x21, 0x11, 0xff, 0xff)
	if _, err := parseProxyFixed(long); err == nil {
		t.Fatal("a 64 KiB header is accepted")
	}
}

// FuzzParseProxyV2: the decoder never panics, and what it accepts has
// the length its header declares and names a TCP source for PROXY.
func FuzzParseProxyV2(f *testing.F) {
	f.Add(proxyHeader(1, netip.MustParseAddrPort("203.0.113.9:5555"), netip.MustParseAddrPort("192.0.2.1:443"), nil))
	f.Add(proxyHeader(1, netip.MustParseAddrPort("[2001:db8::9]:5555"), netip.MustParseAddrPort("[2001:db8::1]:443"), []byte{1, 0, 2, 'h', '2'}))
	f.Add(proxyHeader(0, netip.MustParseAddrPort("203.0.113.9:5555"), netip.MustParseAddrPort("192.0.2.1:443"), nil))
	f.Add([]byte(proxySig + "\x21\x31\x00\x00"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		src, ok, err := ParseProxyV2(b)
		if err != nil {
			return
		}
		if len(b) != proxyFixed+int(binary.BigEndian.Uint16(b[14:16])) {
			t.Fatalf("accepted %d bytes, header says %d", len(b), binary.BigEndian.Uint16(b[14:16]))
		}
		if ok && (b[12]&0x0f != 1 || !src.IsValid()) {
			t.Fatalf("source %v from command %x", src, b[12])
		}
		// The reader agrees with the decoder on the same bytes.
		src2, ok2, err2 := readProxyV2(bytes.NewReader(b))
		if err2 != nil || ok2 != ok || src2 != src {
			t.Fatalf("reader: %v %v %v, decoder %v %v", src2, ok2, err2, src, ok)
		}
	})
}

// TestListener: a trusted peer's connection carries the client its header
// names; an untrusted peer's is untouched; a trusted peer without a
// header is closed.
func TestListener(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(tl, mustPrefixes(t, "127.0.0.1"), 300*time.Millisecond)
	defer l.Close()
	addr := tl.Addr().String()
	dial := func(local string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	accept := func() net.Conn {
		t.Helper()
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// A trusted proxy forwards for 2001:db8::9, then sends data.
	p := dial("127.0.0.1")
	p.Write(append(proxyHeader(1, netip.MustParseAddrPort("[2001:db8::9]:5555"), netip.MustParseAddrPort("[::1]:443"), nil), "hello"...))
	c := accept()
	if got := c.RemoteAddr().String(); got != "[2001:db8::9]:5555" {
		t.Fatalf("trusted peer: RemoteAddr %s", got)
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("data after the header: %q %v", buf, err)
	}

	// An untrusted peer's header is its data.
	u := dial("127.0.0.2")
	hdr := proxyHeader(1, netip.MustParseAddrPort("203.0.113.1:1"), netip.MustParseAddrPort("127.0.0.1:443"), nil)
	u.Write(hdr)
	c = accept()
	if h, _, _ := net.SplitHostPort(c.RemoteAddr().String()); h != "127.0.0.2" {
		t.Fatalf("untrusted peer: RemoteAddr %s", c.RemoteAddr())
	}
	got := make([]byte, len(hdr))
	if _, err := c.Read(got); err != nil || !bytes.Equal(got, hdr[:len(got)]) {
		t.Fatalf("untrusted peer's bytes: %v", err)
	}

	// A trusted peer that sends no header is closed, and does not hold
	// up the next connection.
	silent := dial("127.0.0.1")
	bad := dial("127.0.0.1")
	bad.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	next := dial("127.0.0.1")
	next.Write(proxyHeader(0, netip.MustParseAddrPort("203.0.113.1:1"), netip.MustParseAddrPort("127.0.0.1:443"), nil))
	c = accept()
	if c.LocalAddr().String() != addr || c.RemoteAddr().String() != next.LocalAddr().String() {
		t.Fatalf("LOCAL: RemoteAddr %s, want the peer %s", c.RemoteAddr(), next.LocalAddr())
	}
	for _, x := range []net.Conn{silent, bad} {
		x.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := x.Read(make([]byte, 1)); err == nil {
			t.Fatal("a trusted peer without a header got data")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("a trusted peer without a header stays open")
		}
	}
}
