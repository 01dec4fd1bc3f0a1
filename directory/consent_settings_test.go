package directory

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestConsentLimitsAreSettings: the claim and inbox limits are the
// Config's: with them lowered, a crowd of claimers takes no more one-time
// offers than ClaimsPerDevice and each no more than ClaimsPerClaimer; a
// sender stops at InboxPerSender entries (its refusal says the limit) and
// InboxSenderBytes, and the inbox at InboxEntries. Negative settings, and
// a share larger than its whole, are refused at start.
func TestConsentLimitsAreSettings(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ClaimsPerClaimer, c.ClaimsPerDevice = 2, 3
		c.InboxPerSender, c.InboxSenderBytes, c.InboxEntries, c.InboxBytes = 2, 3000, 3, 1<<20
	})
	targetID, target := e.account("globex")
	want(t, e.do("POST", "/v1/keypackages", target, e.stockUpload(target, "laptop", 20, true)), 201, "")
	crowd := make([]string, 3)
	for i := range crowd {
		_, crowd[i] = e.account(fmt.Sprint("crowd", i))
		e.channel(crowd[i], fmt.Sprintf("crowd%d/a/b", i))
	}
	e.relate(target, crowd...)
	oneTime := map[int]int{}
	for range 4 {
		for i, key := range crowd {
			r := e.do("POST", "/v1/keypackages/claim", key, map[string]string{"account_id": targetID, "channel": fmt.Sprintf("crowd%d/a/b", i)})
			want(t, r, 200, "")
			if r.body["claims"].([]any)[0].(map[string]any)["last_resort"] == false {
				oneTime[i]++
			}
		}
	}
	total := 0
	for i, n := range oneTime {
		if n > 2 {
			t.Fatalf("claimer %d took %d one-time offers, past ClaimsPerClaimer 2", i, n)
		}
		total += n
	}
	if total != 3 {
		t.Fatalf("the crowd took %d one-time offers, want ClaimsPerDevice 3", total)
	}

	// Inbox: a sender's share is 2 entries, 3000 bytes; the inbox holds 3.
	want(t, e.deliverTo(crowd[0], targetID, "crowd0/a/b", 100), 201, "")
	want(t, e.deliverTo(crowd[0], targetID, "crowd0/a/b", 100), 201, "")
	r := e.deliverTo(crowd[0], targetID, "crowd0/a/b", 100)
	want(t, r, 429, "quota_exceeded")
	if !strings.Contains(r.str("message"), "2 Welcomes") {
		t.Fatalf("the refusal does not say the setting: %s", r)
	}
	want(t, e.deliverTo(crowd[1], targetID, "crowd1/a/b", 3001), 429, "quota_exceeded")
	want(t, e.deliverTo(crowd[1], targetID, "crowd1/a/b", 3000), 201, "")
	want(t, e.deliverTo(crowd[2], targetID, "crowd2/a/b", 10), 409, "inbox_full")

	for _, f := range []func(*Config){
		func(c *Config) { c.ClaimsPerClaimer = -1 },
		func(c *Config) { c.ClaimsPerDevice = -1 },
		func(c *Config) { c.InboxPerSender = -1 },
		func(c *Config) { c.InboxSenderBytes = -1 },
		func(c *Config) { c.InboxEntries = -1 },
		func(c *Config) { c.InboxBytes = -1 },
		func(c *Config) { c.ClaimsPerClaimer = 40 },
		func(c *Config) { c.InboxPerSender = 300 },
		func(c *Config) { c.InboxSenderBytes = 32 << 20 },
	} {
		c := Config{JWTSecret: testJWTSecret}
		f(&c)
		if s, err := New(context.Background(), c); err == nil {
			s.Close(context.Background())
			t.Errorf("New accepted %+v", c)
		}
	}
}
