package seat

import (
	"testing"
	"time"
)

// TestParseRetryAfter: whole seconds, a long wait kept at its bound
// instead of dropped, and anything else none.
func TestParseRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1":                             time.Second,
		"3600":                          time.Hour,
		"86400":                         24 * time.Hour, // a daily limit
		"99999999":                      maxRetryAfterKept,
		"9223372036854775807":           maxRetryAfterKept,
		"9223372036854775808":           0, // past int64
		"0":                             0,
		"-5":                            0,
		"":                              0,
		"1.5":                           0,
		"Wed, 21 Oct 2026 07:28:00 GMT": 0, // the date form, which neither plane sends
	} {
		if got := parseRetryAfter(v); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
