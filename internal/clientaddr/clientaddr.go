// Package clientaddr finds the address of the client behind a request, the
// same way for both planes: the TCP peer, unless the peer is a trusted
// proxy, in which case the client is the one the proxy says it forwarded
// for (X-Forwarded-For, or a PROXY protocol v2 header read by [Listener]).
// It also names the keys the planes count clients by: the address, and the
// network it belongs to (an IPv4 /24, an IPv6 /64), so one host with a
// block of addresses is one network.
//
// Trusting a proxy is all or nothing for its peer address: a request that
// reaches a plane directly from a trusted address can claim any client
// address. Only the proxies themselves may be able to connect from those
// addresses.
package clientaddr

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParsePrefixes parses a comma-separated list of CIDR prefixes; a bare
// address stands for itself (/32 or /128). Empty items are skipped.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("clientaddr: %q is not a CIDR prefix or an address", f)
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Trusted reports whether a is in one of the prefixes.
func Trusted(trusted []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Peer is the address of a RemoteAddr ("host:port", or a bare address),
// IPv4-mapped addresses unmapped and the zone dropped; ok is false when it
// does not parse.
func Peer(remote string) (netip.Addr, bool) {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// Of is the client address of r: the TCP peer (r.RemoteAddr), or, when
// the peer is in trusted, the last address of X-Forwarded-For (all its
// header lines in order) that is not itself a trusted proxy, walking from
// the right. Each trusted proxy appends the peer it got the request from,
// so the entries left of the first untrusted one, counting from the right,
// were written by the client and are ignored. An entry that does not parse
// stops the walk: the nearest trusted hop is then the client. ok is false
// only when r.RemoteAddr itself does not parse (a non-TCP listener).
func Of(r *http.Request, trusted []netip.Prefix) (a netip.Addr, ok bool) {
	peer, ok := Peer(r.RemoteAddr)
	if !ok || len(trusted) == 0 || !Trusted(trusted, peer) {
		return peer, ok
	}
	return forwarded(peer, r.Header.Values("X-Forwarded-For"), trusted), true
}

// forwarded walks the X-Forwarded-For values from the right, from the
// trusted peer.
func forwarded(peer netip.Addr, values []string, trusted []netip.Prefix) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			item := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				item, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			a, ok := parseHop(item)
			if !ok {
				return client
			}
			client = a
			if !Trusted(trusted, a) {
				return client
			}
		}
	}
	return client
}

// parseHop parses one X-Forwarded-For entry: an address, possibly in
// brackets or with a port as some proxies write it.
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// Net is the network a client address is counted in besides itself: its
// IPv4 /24, or its IPv6 /64 (the block one subscriber or one host usually
// holds, so an attacker hopping through it is one network).
func Net(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p
}

// Keys are the keys a client address is counted by: the address itself
// and its network ([Net]).
type Keys struct {
	Addr netip.Addr
	Net  netip.Prefix
}

// KeysOf returns the keys of a.
func KeysOf(a netip.Addr) Keys {
	a = a.Unmap().WithZone("")
	return Keys{Addr: a, Net: Net(a)}
}

// errBadHeader is returned by a Listener's connections for a peer that
// had to send a PROXY header and sent none that parsed.
var errBadHeader = errors.New("clientaddr: bad PROXY protocol v2 header from a trusted proxy")
