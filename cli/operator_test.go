package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperatorPathClosedSignup: with tally serve --signup closed, signin
// fails with a hint to ask the operator; the operator makes an account
// with tally serve account create, the person takes it with tally signin
// --api-key and connects; the operator lists it among the idle accounts
// and removes another one, whose key then stops working.
func TestOperatorPathClosedSignup(t *testing.T) {
	data := t.TempDir()
	srv := startServe(t, data, "--signup", "closed")
	op := []string{"--data", data, "--api-url", srv.apiURL}
	home := t.TempDir()
	g := []string{"--home", home, "--api-url", srv.apiURL, "--relay-url", srv.relURL}
	mustTally(t, append(g, "init")...)

	_, err := tally(t, "", append(g, "signin", "--org", "acme")...)
	if err == nil || !strings.Contains(err.Error(), "signup on this directory is closed") {
		t.Fatalf("signin with closed signup: %v", err)
	}
	var acct struct {
		AccountID string `json:"account_id"`
		Org       string `json:"org"`
		APIKey    string `json:"api_key"`
	}
	out := mustTally(t, append([]string{"--json", "serve", "account", "create", "--email", "ann@example.com", "--org", "acme"}, op...)...)
	if err := json.Unmarshal([]byte(out), &acct); err != nil || !strings.HasPrefix(acct.APIKey, "sk_live_") {
		t.Fatalf("account create printed %q (%v)", out, err)
	}
	if _, err := tally(t, "", append(g, "signin", "--api-key", "sk_live_wrong")...); err == nil || !strings.Contains(err.Error(), "does not know this API key") {
		t.Fatalf("signin with a wrong key: %v", err)
	}
	out = mustTally(t, append(g, "signin", "--api-key", acct.APIKey)...)
	if !strings.Contains(out, "org acme") || !strings.Contains(out, acct.AccountID) {
		t.Fatalf("signin --api-key printed %q", out)
	}
	if out := mustTally(t, append(g, "connect")...); !strings.Contains(out, "acme/tally/") {
		t.Fatalf("connect printed %q", out)
	}

	// A second account, never used, which the operator removes.
	out = mustTally(t, append([]string{"--json", "serve", "account", "create", "--email", "bob@example.com", "--org", "bobs"}, op...)...)
	var bob struct {
		AccountID string `json:"account_id"`
		APIKey    string `json:"api_key"`
	}
	json.Unmarshal([]byte(out), &bob)
	list := mustTally(t, append([]string{"serve", "accounts", "list"}, op...)...)
	if !strings.Contains(list, acct.AccountID) || !strings.Contains(list, bob.AccountID) {
		t.Fatalf("accounts list printed %q", list)
	}
	if list := mustTally(t, append([]string{"serve", "accounts", "list", "--idle", "720h"}, op...)...); strings.TrimSpace(list) != "" {
		t.Fatalf("no account is a month idle, list printed %q", list)
	}
	mustTally(t, append([]string{"serve", "accounts", "remove", bob.AccountID}, op...)...)
	if code := postJSON(t, srv.apiURL+"/v1/tokens", bob.APIKey, nil, nil); code != 401 {
		t.Fatalf("the removed account's key mints a token: %d", code)
	}
	// The taken account owns its sync channel: it is not removed.
	if _, err := tally(t, "", append([]string{"serve", "accounts", "remove", acct.AccountID}, op...)...); err == nil || !strings.Contains(err.Error(), "account_owns_channels") {
		t.Fatalf("removing an account that owns channels: %v", err)
	}
}

// TestOperatorPathInviteSignup: with --signup invite, signin alone is
// refused with a hint; a token from tally serve token lets one person
// sign up, once.
func TestOperatorPathInviteSignup(t *testing.T) {
	data := t.TempDir()
	srv := startServe(t, data, "--signup", "invite")
	op := []string{"--data", data, "--api-url", srv.apiURL}
	seatHome := func() []string {
		g := []string{"--home", t.TempDir(), "--api-url", srv.apiURL, "--relay-url", srv.relURL}
		mustTally(t, append(g, "init")...)
		return g
	}
	g := seatHome()
	if _, err := tally(t, "", append(g, "signin", "--org", "acme")...); err == nil || !strings.Contains(err.Error(), "needs an invite") {
		t.Fatalf("signin with invite signup: %v", err)
	}
	var tok struct{ Token string }
	json.Unmarshal([]byte(mustTally(t, append([]string{"--json", "serve", "token", "--ttl", "1h"}, op...)...)), &tok)
	if !strings.HasPrefix(tok.Token, "skt_sup_") {
		t.Fatalf("serve token printed %+v", tok)
	}
	if out := mustTally(t, append(g, "signin", "--org", "acme", "--signup-token", tok.Token)...); !strings.Contains(out, "org acme") {
		t.Fatalf("signin --signup-token printed %q", out)
	}
	if _, err := tally(t, "", append(seatHome(), "signin", "--org", "beta", "--signup-token", tok.Token)...); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("a second signup with one token: %v", err)
	}
}

// TestServeSignupFlags: the flags that choose signup, the budgets and
// the consent limits refuse bad values (zero or negative among them).
func TestServeSignupFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--signup", "sometimes"},
		{"serve", "--signup", "open", "--open-signup"},
		{"serve", "--relay-server-budget", "lots"},
		{"serve", "--relay-group-budget", "0"},
		{"serve", "--directory-account-budget", "-1"},
		{"serve", "--directory-server-budget", "a lot"},
		{"serve", "--directory-claims-per-claimer", "0"},
		{"serve", "--directory-claims-per-device", "-3"},
		{"serve", "--directory-inbox-per-sender", "0"},
		{"serve", "--directory-inbox-entries", "-1"},
		{"serve", "--directory-inbox-bytes", "0"},
		{"serve", "--directory-claims-per-claimer", "40"},
	} {
		if _, err := tally(t, "", args...); err == nil {
			t.Errorf("tally %s: no error", strings.Join(args, " "))
		}
	}
	for in, want := range map[string]int64{"1GiB": 1 << 30, "512M": 512 << 20, "4096": 4096, "2 TiB": 2 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// TestOperatorWithoutServe: tally serve accounts create works on a data
// folder whose serve is not running (and on one never started), the serve
// then started on the folder knows the account, the person signs in with
// the key from a file (or stdin), and accounts disable cuts it off at once.
// While a serve holds the folder, an operator command that cannot reach it
// says so instead of opening the folder beside it.
func TestOperatorWithoutServe(t *testing.T) {
	data := t.TempDir()
	down := refusedURL(t)
	var acct struct {
		AccountID string `json:"account_id"`
		APIKey    string `json:"api_key"`
	}
	out := mustTally(t, "--json", "serve", "accounts", "create", "--data", data, "--api-url", down, "--email", "ann@example.com", "--org", "acme")
	if err := json.Unmarshal([]byte(out), &acct); err != nil || !strings.HasPrefix(acct.APIKey, "sk_live_") {
		t.Fatalf("accounts create with no serve printed %q (%v)", out, err)
	}

	srv := startServe(t, data, "--signup", "closed")
	g := []string{"--home", t.TempDir(), "--api-url", srv.apiURL, "--relay-url", srv.relURL}
	mustTally(t, append(g, "init")...)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(acct.APIKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustTally(t, append(g, "signin", "--api-key-file", keyFile)...); !strings.Contains(out, acct.AccountID) {
		t.Fatalf("signin --api-key-file printed %q", out)
	}
	g2 := []string{"--home", t.TempDir(), "--api-url", srv.apiURL, "--relay-url", srv.relURL}
	mustTally(t, append(g2, "init")...)
	if _, err := tally(t, acct.APIKey+"\n", append(g2, "signin", "--api-key-file", "-")...); err != nil {
		t.Fatalf("signin --api-key-file - : %v", err)
	}
	mustTally(t, append(g, "connect")...)

	if code, _, errw := mainOut(context.Background(), "", "serve", "accounts", "create", "--data", data, "--api-url", down, "--email", "x@example.com", "--org", "x"); code == 0 || !strings.Contains(errw, "another holds") {
		t.Fatalf("accounts create beside a running serve: exit %d, %q", code, errw)
	}

	mustTally(t, "serve", "accounts", "disable", acct.AccountID, "--data", data, "--api-url", srv.apiURL)
	if code, _, errw := mainOut(context.Background(), "", append(g, "connect")...); code != exitNotAllowed {
		t.Fatalf("connect after disable: exit %d, %q", code, errw)
	}
}
