// Package skytaletest starts a complete directory and relay in the test's
// process, on loopback, with in-memory SQLite, for tests of anything built
// on top of them.
package skytaletest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
)

// Stack is a running directory and relay.
type Stack struct {
	*skytale.Stack
	APIURL         string // base URL of the directory
	RelayURL       string // base URL of the relay (http://; WebSockets at ws://)
	JWTSecret      []byte
	InternalSecret []byte
}

// Options adjusts a stack; the zero value is open signup with defaults.
type Options struct {
	ClosedSignup bool
	Relay        skytale.RelayConfig
	Directory    skytale.DirectoryConfig
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
	st, err := skytale.NewStack(skytale.StackConfig{
		JWTSecret:      jwtSecret,
		InternalSecret: internal,
		Directory:      dc,
		Relay:          opts.Relay,
	})
	if err != nil {
		t.Fatalf("skytaletest: %v", err)
	}
	api := httptest.NewServer(st.Directory)
	rel := httptest.NewServer(st.Relay)
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
	return &Stack{Stack: st, APIURL: api.URL, RelayURL: rel.URL, JWTSecret: jwtSecret, InternalSecret: internal}
}

// Account is a directory account made for a test.
type Account struct {
	ID     string `json:"account_id"`
	Org    string `json:"org"`
	APIKey string `json:"api_key"`
}

// NewAccount creates an account in org (with the internal secret, so it
// works whether or not signup is open).
func (s *Stack) NewAccount(t testing.TB, org string) Account {
	t.Helper()
	var a Account
	email := fmt.Sprintf("%x@%s.test", random(6), org)
	s.call(t, "/v1/accounts", string(s.InternalSecret), map[string]string{"email": email, "org": org}, &a)
	return a
}

// Token mints a JWT for the holder of apiKey.
func (s *Stack) Token(t testing.TB, apiKey string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	s.call(t, "/v1/tokens", apiKey, map[string]any{}, &out)
	return out.Token
}

func (s *Stack) call(t testing.TB, path, bearer string, in, out any) {
	t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", s.APIURL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("skytaletest: POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e struct{ Error, Message string }
		json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("skytaletest: POST %s: %d %s: %s", path, resp.StatusCode, e.Error, e.Message)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("skytaletest: POST %s: %v", path, err)
	}
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
