package seat

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// A read the servers refuse for load is sent again. The directory answers
// a GET past its read bounds (the reads of one account in flight, the
// bytes of answers in flight on the whole server, the read buckets) with
// 429 rate_limited and a Retry-After, as the relay does for its catch-up
// reads; the refusal says nothing about the request, only that the server
// is busy now, so handing it to the user would turn someone else's crowd
// of reads into this user's failure.
//
// Only GETs are retried: they change nothing, so a second try cannot do
// anything twice. The wait is the server's Retry-After plus up to a
// quarter second of jitter (so the clients refused together do not come
// back together), at most readRetries times, and only while the
// Retry-After is at most maxRetryAfter: a longer one (an account's read
// bucket that refills slowly, say) is the caller's to see at once. A
// context that ends while waiting returns the refusal.
const (
	readRetries   = 3
	maxRetryAfter = 5 * time.Second
	retryJitter   = 250 * time.Millisecond
)

// retryWait reports whether a request of method that failed with err on
// its attempt-th retry (0 for the first try) is to be sent again, and
// after how long.
func retryWait(method string, err error, attempt int) (time.Duration, bool) {
	var ae *APIError
	if method != http.MethodGet || attempt >= readRetries || !errors.As(err, &ae) ||
		ae.Status != http.StatusTooManyRequests || ae.Code != "rate_limited" ||
		ae.RetryAfter <= 0 || ae.RetryAfter > maxRetryAfter {
		return 0, false
	}
	return ae.RetryAfter + rand.N(retryJitter), true
}

// parseRetryAfter reads a Retry-After of whole seconds (the form both
// planes send); anything else is 0. A wait longer than maxRetryAfterKept
// (a daily limit says hours) is kept as that bound, so the caller still
// learns that the wait is long rather than that there is none.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, int64(maxRetryAfterKept/time.Second))) * time.Second
}

// maxRetryAfterKept bounds the Retry-After an APIError carries.
const maxRetryAfterKept = 7 * 24 * time.Hour
