// Package ratelimit keeps token buckets per key (a remote address, an
// account) in bounded memory, on top of golang.org/x/time/rate.
package ratelimit

import (
	"container/list"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed is a set of token buckets, one per key, all with the same rate and
// burst. It is safe for concurrent use.
//
// Memory is bounded: a key whose bucket has been left alone long enough to
// be full again is forgotten (forgetting it changes nothing: a new bucket
// starts full), and at most maxKeys keys are tracked. When that many are
// busy at once, the least recently used one is forgotten early, which can
// only give that key a fresh bucket, never refuse a key that has tokens.
type Keyed struct {
	limit   rate.Limit
	burst   int
	refill  time.Duration // an untouched bucket is full again after this
	maxKeys int

	mu   sync.Mutex
	keys map[string]*list.Element
	lru  list.List // of *entry, most recently used first
}

type entry struct {
	key  string
	lim  *rate.Limiter
	last time.Time
}

// NewKeyed returns buckets that hold burst tokens and gain one every
// every. maxKeys bounds the keys tracked at once (at least 1).
func NewKeyed(every time.Duration, burst, maxKeys int) *Keyed {
	if burst < 1 {
		burst = 1
	}
	if maxKeys < 1 {
		maxKeys = 1
	}
	return &Keyed{
		limit:   rate.Every(every),
		burst:   burst,
		refill:  every * time.Duration(burst),
		maxKeys: maxKeys,
		keys:    make(map[string]*list.Element),
	}
}

// Allow takes a token from key's bucket at time now. When the bucket is
// empty it takes nothing and reports how long until a token is back. A nil
// *Keyed allows everything.
func (k *Keyed) Allow(key string, now time.Time) (ok bool, retry time.Duration) {
	if k == nil {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgetIdle(now)
	var e *entry
	if el, found := k.keys[key]; found {
		k.lru.MoveToFront(el)
		e = el.Value.(*entry)
	} else {
		for len(k.keys) >= k.maxKeys {
			k.remove(k.lru.Back())
		}
		e = &entry{key: key, lim: rate.NewLimiter(k.limit, k.burst)}
		k.keys[key] = k.lru.PushFront(e)
	}
	if now.After(e.last) {
		e.last = now
	}
	if e.lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - e.lim.TokensAt(now)
	secs := missing / float64(k.limit)
	if math.IsInf(secs, 0) || math.IsNaN(secs) || secs > 1e9 {
		return false, time.Duration(math.MaxInt64)
	}
	return false, time.Duration(secs * float64(time.Second))
}

// Len is the number of keys tracked now.
func (k *Keyed) Len() int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}

// forgetIdle drops keys untouched for the refill time (their buckets are
// full), oldest first.
func (k *Keyed) forgetIdle(now time.Time) {
	for el := k.lru.Back(); el != nil; el = k.lru.Back() {
		if now.Sub(el.Value.(*entry).last) < k.refill {
			return
		}
		k.remove(el)
	}
}

func (k *Keyed) remove(el *list.Element) {
	delete(k.keys, el.Value.(*entry).key)
	k.lru.Remove(el)
}

// AddrKey is the key of the client at a remote address ("host:port" as in
// http.Request.RemoteAddr, or a bare IP). IPv6 clients are keyed by their
// /64 prefix, the block one subscriber usually holds, so an address hopping
// within it is one client. An unparsable address is its own key.
func AddrKey(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ClientAddr(ip)
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).String()
	}
	return ip.String()
}

// ClientAddr is the address a client at ip is counted by: ip itself
// (IPv4-mapped IPv6 unmapped, zone dropped), or for IPv6 the first address
// of its /64.
func ClientAddr(ip netip.Addr) netip.Addr {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}
