// Package skytaletest starts a complete directory and relay in the test's
// process, on loopback, with in-memory SQLite, for tests of anything built
// on top of them.
//
// It is the import path for a program that embeds a seat and wants a
// real stack in its tests: it builds the stack from packages directory and
// relay alone, wired as skytale.NewStack wires them, and links neither
// the PostgreSQL store (directory/pgstore), nor the metrics adapters, nor
// NATS.
package skytaletest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/internal/stack"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
)

// Stack is a running directory and relay.
type Stack struct {
	Directory      *directory.Server
	Relay          *relay.Server
	APIURL         string // base URL of the directory
	RelayURL       string // base URL of the relay (http://; WebSockets at ws://)
	JWTSecret      []byte
	InternalSecret []byte
}

// Options adjusts a stack; the zero value is open signup with defaults.
type Options struct {
	ClosedSignup bool
	Relay        relay.Config
	Directory    directory.Config
}

// NewStack starts a stack that is torn down when the test ends.
func NewStack(t testing.TB) *Stack { return NewStackWith(t, Options{}) }

// NewStackWith starts a stack with opts.
func NewStackWith(t testing.TB, opts Options) *Stack {
	t.Helper()
	// Hex text, as tally serve keeps them, so they fit in headers.
	jwtSecret, internal := []byte(hex.EncodeToString(random(32))), []byte(hex.EncodeToString(random(32)))
	dc := opts.Directory
	dc.OpenSignup = !opts.ClosedSignup
	d, r, err := stack.Start(context.Background(), stack.Config{
		JWTSecret:      jwtSecret,
		InternalSecret: internal,
		Directory:      dc,
		Relay:          opts.Relay,
	})
	if err != nil {
		t.Fatalf("skytaletest: %v", err)
	}
	st := &Stack{Directory: d, Relay: r, JWTSecret: jwtSecret, InternalSecret: internal}
	api := httptest.NewServer(d)
	rel := httptest.NewServer(r)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rel.CloseClientConnections()
		if err := st.Close(ctx); err != nil {
			t.Errorf("skytaletest: close: %v", err)
		}
		rel.Close()
		api.Close()
	})
	st.APIURL, st.RelayURL = api.URL, rel.URL
	return st
}

// Close closes the relay, then the directory, and waits for both. The
// test's end does it too; closing twice is harmless.
func (s *Stack) Close(ctx context.Context) error {
	return errors.Join(s.Relay.Close(ctx), s.Directory.Close(ctx))
}

// Account is a directory account made for a test.
type Account struct {
	ID, Org, APIKey string
}

// NewAccount creates an account in org (with the internal secret, so it
// works whether or not signup is open).
func (s *Stack) NewAccount(t testing.TB, org string) Account {
	t.Helper()
	email := fmt.Sprintf("%x@%s.test", random(6), org)
	dc := &seat.DirectoryClient{BaseURL: s.APIURL, Credential: string(s.InternalSecret)}
	a, err := dc.CreateAccount(context.Background(), email, org)
	if err != nil {
		t.Fatalf("skytaletest: create account: %v", err)
	}
	return Account{ID: a.AccountID, Org: a.Org, APIKey: a.APIKey}
}

// Token mints a JWT for the holder of apiKey.
func (s *Stack) Token(t testing.TB, apiKey string) string {
	t.Helper()
	tok, _, err := (&seat.DirectoryClient{BaseURL: s.APIURL, Credential: apiKey}).Token(context.Background())
	if err != nil {
		t.Fatalf("skytaletest: mint token: %v", err)
	}
	return tok
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// Subject returns the sub claim of a JWT without verifying it: for tests
// that need the account id behind a credential.
func Subject(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("skytaletest: not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var c struct {
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", err
	}
	return c.Sub, nil
}
