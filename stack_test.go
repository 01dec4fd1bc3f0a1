package skytale_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// revocationRoundTrip opens a relay connection as an account, revokes the
// account at the directory, and checks that the live socket is closed and
// every relay endpoint then answers 403.
func revocationRoundTrip(t *testing.T, apiURL, relayURL, apiKey string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := &seat.DirectoryClient{BaseURL: apiURL, Credential: apiKey}
	rc := &seat.RelayClient{BaseURL: relayURL, Token: func(ctx context.Context) (string, error) {
		tok, _, err := dir.Token(ctx)
		return tok, err
	}}
	if err := dir.RegisterChannel(ctx, "acme/ops/alerts"); err != nil {
		t.Fatal(err)
	}
	conn, err := rc.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Subscribe(ctx, "acme/ops/alerts"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Publish(ctx, "acme/ops/alerts", []byte("before")); err != nil {
		t.Fatal(err)
	}
	// A token minted before the revocation, to use after it.
	tok, err := rc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := dir.Revoke(ctx, subOf(t, apiURL, apiKey)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case _, ok := <-conn.Pushes():
		if ok {
			t.Fatal("unexpected push")
		}
	case <-ctx.Done():
		t.Fatal("live socket of a revoked account still open")
	}
	t.Logf("socket closed %v after revocation", time.Since(start).Round(time.Millisecond))

	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		req, _ := http.NewRequest("GET", relayURL+path+"?channel=acme/ops/alerts", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s after revocation: %d, want 403", path, resp.StatusCode)
		}
	}
	staticRC := &seat.RelayClient{BaseURL: relayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	if _, err := staticRC.Dial(ctx); err == nil {
		t.Error("revoked account authenticated a new socket")
	}
	// The directory refuses the revoked key too.
	if _, _, err := dir.Token(ctx); err == nil {
		t.Error("revoked account minted a token")
	}
}

// subOf returns the account id behind an API key, from a minted token.
func subOf(t *testing.T, apiURL, apiKey string) string {
	t.Helper()
	dir := &seat.DirectoryClient{BaseURL: apiURL, Credential: apiKey}
	tok, _, err := dir.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sub, err := skytaletest.Subject(tok)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestRevocationInProcess: directory and relay in one process (NewStack).
func TestRevocationInProcess(t *testing.T) {
	st := skytaletest.NewStack(t)
	a := st.NewAccount(t, "acme")
	revocationRoundTrip(t, st.APIURL, st.RelayURL, a.APIKey)
}

// TestRevocationSplit: a relay in its own process learns revocations by
// polling the directory's internal endpoint with the internal secret.
func TestRevocationSplit(t *testing.T) {
	jwtSecret := []byte("0123456789abcdef0123456789abcdef")
	internal := "internal-secret-of-enough-length-0123"
	d, err := skytale.NewDirectory(context.Background(), skytale.DirectoryConfig{JWTSecret: jwtSecret, InternalSecret: []byte(internal), OpenSignup: true})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(d)
	defer api.Close()
	defer d.Close(context.Background())
	r, err := skytale.NewRelay(context.Background(), skytale.RelayConfig{
		JWTSecret:      jwtSecret,
		Revocations:    relay.NewHTTPRevocations(api.URL, internal, nil),
		RevocationPoll: 200 * time.Millisecond,
		Members:        relay.NewHTTPMembers(api.URL, internal, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	rel := httptest.NewServer(r)
	defer rel.Close()
	defer r.Close(context.Background())

	a, err := (&seat.DirectoryClient{BaseURL: api.URL}).CreateAccount(context.Background(), "ops@acme.test", "acme")
	if err != nil {
		t.Fatal(err)
	}
	revocationRoundTrip(t, api.URL, rel.URL, a.APIKey)

	// Without the internal secret the feed is closed.
	resp, err := http.Get(api.URL + "/v1/internal/revocations?after=0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("internal feed without secret: %d", resp.StatusCode)
	}
}
