package skytale_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// forwardedFor sends every request as forwarded for ip (the directory
// trusts loopback as its proxy in the test below).
type forwardedFor string

func (f forwardedFor) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", string(f))
	return http.DefaultTransport.RoundTrip(r)
}

// TestSignupGroupBudget: accounts that sign up from many addresses of one
// IPv4 /24, each in an org of its own and each under its quota, together
// reach their signup group's budget on the relay: the directory records
// the group and puts it in their tokens, and the relay refuses the next
// publish with quota_exceeded naming the group, while an account from
// another network still publishes. Minting accounts buys no disk.
func TestSignupGroupBudget(t *testing.T) {
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Directory: skytale.DirectoryConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Relay:     skytale.RelayConfig{AccountQuota: 1000, GroupBudget: 2500},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	payload := bytes.Repeat([]byte{'x'}, 450)
	// publishAll signs up from ip, and publishes payloads until refused
	// or n are stored; it returns how many were and the refusal.
	publishAll := func(ip, org string, n int) (int, error) {
		t.Helper()
		hc := &http.Client{Transport: forwardedFor(ip)}
		a, err := (&seat.DirectoryClient{BaseURL: st.APIURL, HTTP: hc}).CreateAccount(ctx, org+"@example.com", org)
		if err != nil {
			t.Fatal(err)
		}
		dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey, HTTP: hc}
		ch := org + "/files/box"
		if err := dir.RegisterChannel(ctx, ch); err != nil {
			t.Fatal(err)
		}
		rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(ctx context.Context) (string, error) {
			tok, _, err := dir.Token(ctx)
			return tok, err
		}}
		conn, err := rc.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Subscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := conn.Publish(ctx, ch, payload); err != nil {
				return i, err
			}
		}
		return n, nil
	}
	stored := 0
	var refusal error
	for i := 1; i <= 8 && refusal == nil; i++ {
		// Two entries each: 900 bytes, under the account's 1000.
		n, err := publishAll(fmt.Sprintf("198.51.100.%d", i), fmt.Sprintf("crowd%d", i), 2)
		stored += n
		refusal = err
	}
	var fe *seat.FrameError
	if !errors.As(refusal, &fe) || fe.Code != "quota_exceeded" || !strings.Contains(fe.Message, "signed up from this network") {
		t.Fatalf("after %d entries the crowd got %v, want the group's quota_exceeded", stored, refusal)
	}
	if stored != 5 { // 5 × 450 = 2250 fit in 2500, the sixth does not
		t.Fatalf("the crowd stored %d entries of 450 bytes under a group budget of 2500", stored)
	}
	if n, err := publishAll("203.0.113.9", "elsewhere", 2); err != nil || n != 2 {
		t.Fatalf("an account from another network: %d stored, %v", n, err)
	}
}
