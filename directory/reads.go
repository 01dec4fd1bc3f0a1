package directory

import (
	"net/http"
	"sync"
	"time"
)

// Read bounds. Every directory GET that answers blobs or lists is paged,
// each page at most maxAnswerBytes of blobs (and a count cap of its own),
// and runs inside the read gate: at most Limits.ReadsPerAccount reads of
// one account in flight, and at most Limits.ReadBytes / maxAnswerBytes
// reads of the whole server, so the bytes of answers being built and
// written are bounded whatever a crowd of accounts does. With the
// defaults (4 per account, 128 MiB) the worst case is 32 answers of 4 MiB
// of blobs in flight: 8 accounts each with 4 reads. A read beyond its
// bound waits up to readWait for a slot, then is answered 429
// rate_limited with a Retry-After.
const (
	maxAnswerBytes = 4 << 20
	readWait       = time.Second
)

// readGate bounds the reads in flight, per account and in all. The zero
// bounds mean none.
type readGate struct {
	perAccount int
	total      chan struct{} // one token per read in flight; nil for no bound

	mu       sync.Mutex
	accounts map[string]*accountReads
	// peakAccount and peakTotal are the most reads seen in flight for one
	// account and in all: what the tests hold against the bounds.
	inFlight, peakAccount, peakTotal int
}

// accountReads is the semaphore of one account's reads; users counts the
// reads holding or waiting for it, so that it is forgotten when none do.
type accountReads struct {
	slots chan struct{}
	users int
}

func newReadGate(perAccount int, totalBytes int64) *readGate {
	g := &readGate{accounts: map[string]*accountReads{}}
	if perAccount > 0 {
		g.perAccount = perAccount
	}
	if totalBytes > 0 {
		g.total = make(chan struct{}, max(int(totalBytes/maxAnswerBytes), 1))
	}
	return g
}

// acquire takes a slot of account's and one of the server's, waiting up
// to wait for them. It returns the release, or the scope ("account" or
// "server") whose bound refused the read.
func (g *readGate) acquire(account string, wait time.Duration) (release func(), refused string) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var a *accountReads
	if g.perAccount > 0 {
		g.mu.Lock()
		a = g.accounts[account]
		if a == nil {
			a = &accountReads{slots: make(chan struct{}, g.perAccount)}
			g.accounts[account] = a
		}
		a.users++
		g.mu.Unlock()
		if !take(a.slots, timer) {
			g.leave(account, a, false)
			return nil, "account"
		}
	}
	if g.total != nil {
		if !take(g.total, timer) {
			g.leave(account, a, true)
			return nil, "server"
		}
	}
	g.mu.Lock()
	g.inFlight++
	g.peakTotal = max(g.peakTotal, g.inFlight)
	if a != nil {
		g.peakAccount = max(g.peakAccount, len(a.slots))
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
		if g.total != nil {
			<-g.total
		}
		g.leave(account, a, true)
	}, ""
}

// take puts a token in slots, at once if there is room, else waiting
// until the timer fires. It reports whether it did.
func take(slots chan struct{}, timer *time.Timer) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	select {
	case slots <- struct{}{}:
		return true
	case <-timer.C:
		return false
	}
}

// leave gives back account's slot (if held) and forgets the account's
// semaphore once no read holds or waits for it.
func (g *readGate) leave(account string, a *accountReads, held bool) {
	if a == nil {
		return
	}
	if held {
		<-a.slots
	}
	g.mu.Lock()
	if a.users--; a.users == 0 {
		delete(g.accounts, account)
	}
	g.mu.Unlock()
}

// peaks reports the most reads seen in flight for one account and in all.
func (g *readGate) peaks() (account, total int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peakAccount, g.peakTotal
}

// reading is authed for a GET that answers blobs or lists: the read
// buckets (Limits.Read) around the credential, then a slot of the read
// gate for the length of the answer.
func (s *Server) reading(h func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authLimited(w, r, limitRead)
		if !ok {
			return
		}
		release, refused := s.reads.acquire(p.account, readWait)
		if refused != "" {
			s.metrics.refusal(limitRead, refused)
			rateLimited(w, time.Second, "too many reads in flight for this "+refused)
			return
		}
		defer release()
		h(w, r, p)
	}
}
