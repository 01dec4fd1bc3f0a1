package cli

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// upgradeVia sends a WebSocket upgrade to the relay at url from 127.0.0.1,
// after a PROXY v2 header naming proxied when it is valid, with an
// X-Forwarded-For header when xff is set, and returns the status. The
// socket is left open (silent) until the test ends.
func upgradeVia(t *testing.T, url string, proxied netip.Addr, xff string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if proxied.IsValid() {
		c.Write(proxyV2(proxied))
	}
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
	if xff != "" {
		fmt.Fprintf(c, "X-Forwarded-For: %s\r\n", xff)
	}
	fmt.Fprintf(c, "\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	return resp.StatusCode
}

// proxyV2 is a PROXY protocol v2 header for a TCP connection from src.
func proxyV2(src netip.Addr) []byte {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21")
	var addrs []byte
	if src.Is4() {
		b = append(b, 0x11)
		a := src.As4()
		addrs = append(append(addrs, a[:]...), 127, 0, 0, 1)
	} else {
		b = append(b, 0x21)
		a, d := src.As16(), netip.IPv6Loopback().As16()
		addrs = append(append(addrs, a[:]...), d[:]...)
	}
	addrs = binary.BigEndian.AppendUint16(addrs, 40000)
	addrs = binary.BigEndian.AppendUint16(addrs, 443)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return append(b, addrs...)
}

// TestServeTrustedProxy: behind a proxy on loopback, one client's silent
// WebSockets take the relay's login share of everyone behind the proxy
// unless --trusted-proxy names it; with it, the forwarded client is
// counted, by X-Forwarded-For or, with --proxy-protocol, by the PROXY v2
// header, per address and per /64.
func TestServeTrustedProxy(t *testing.T) {
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	t.Run("untrusted", func(t *testing.T) {
		p := serveInProcess(t, serveOptions{Data: t.TempDir(), admissionOptions: admissionOptions{RelayLoginsPerIP: 4}})
		for range 4 {
			if code := upgradeVia(t, p.relURL, netip.Addr{}, "203.0.113.66"); code != 101 {
				t.Fatalf("upgrade: %d", code)
			}
		}
		// Without the setting, another client behind the proxy is the
		// same one address.
		if code := upgradeVia(t, p.relURL, netip.Addr{}, "203.0.113.7"); code != 429 {
			t.Fatalf("another client behind an untrusted proxy: %d, want 429", code)
		}
	})
	t.Run("x-forwarded-for", func(t *testing.T) {
		p := serveInProcess(t, serveOptions{Data: t.TempDir(), admissionOptions: admissionOptions{RelayLoginsPerIP: 4, TrustedProxies: loop}})
		for range 4 {
			upgradeVia(t, p.relURL, netip.Addr{}, "203.0.113.66")
		}
		if code := upgradeVia(t, p.relURL, netip.Addr{}, "203.0.113.66"); code != 429 {
			t.Fatalf("the abusive client past its share: %d, want 429", code)
		}
		if code := upgradeVia(t, p.relURL, netip.Addr{}, "203.0.113.7"); code != 101 {
			t.Fatalf("another client behind a trusted proxy: %d, want 101", code)
		}
	})
	t.Run("proxy-protocol", func(t *testing.T) {
		p := serveInProcess(t, serveOptions{Data: t.TempDir(), admissionOptions: admissionOptions{
			RelayLoginsPerIP: 4, RelayLoginsPerNet: 3, TrustedProxies: loop, ProxyProtocol: true}})
		for i := range 3 {
			if code := upgradeVia(t, p.relURL, netip.MustParseAddr(fmt.Sprintf("2001:db8:0:1::%x", i+1)), ""); code != 101 {
				t.Fatalf("upgrade: %d", code)
			}
		}
		// Another address of the same /64.
		if code := upgradeVia(t, p.relURL, netip.MustParseAddr("2001:db8:0:1::99"), ""); code != 429 {
			t.Fatalf("one /64 past its share: %d, want 429", code)
		}
		if code := upgradeVia(t, p.relURL, netip.MustParseAddr("2001:db8:0:2::1"), ""); code != 101 {
			t.Fatalf("another /64: %d, want 101", code)
		}
		// The directory reads the header too.
		c, err := net.Dial("tcp", strings.TrimPrefix(p.apiURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(proxyV2(netip.MustParseAddr("198.51.100.4")))
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("directory health through the PROXY header: %v", err)
		}
		// A trusted proxy's connection without the header is closed.
		if _, err := http.Get(p.apiURL + "/health"); err == nil {
			t.Fatal("a trusted peer without a PROXY header was served")
		}
	})
}
