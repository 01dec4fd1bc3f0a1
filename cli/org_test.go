package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCLIOrgInvite: `tally org invite` prints an org invite alone on
// stdout; `tally signin --org acme` into the existing org says to ask for
// one; `--org-invite` with it joins acme; a bad or used-up invite says so.
func TestCLIOrgInvite(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")

	tok := strings.TrimSpace(mustTally(t, append(alice, "org", "invite", "--uses", "1", "--ttl", "1h")...))
	if !strings.HasPrefix(tok, "skt_org_") || strings.ContainsAny(tok, " \n") {
		t.Fatalf("org invite printed %q", tok)
	}
	var j struct {
		Org, Token string
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(alice, "--json", "org", "invite")...)), &j); err != nil || j.Org != "acme" || !strings.HasPrefix(j.Token, "skt_org_") {
		t.Fatalf("org invite --json: %+v %v", j, err)
	}

	carol := []string{"--home", t.TempDir(), "--api-url", st.APIURL, "--relay-url", st.RelayURL}
	mustTally(t, append(carol, "init")...)
	_, err := tally(t, "", append(carol, "signin", "--org", "acme")...)
	if err == nil || !strings.Contains(err.Error(), "acme already exists") || !strings.Contains(err.Error(), "`tally org invite`") ||
		!strings.Contains(err.Error(), "--org-invite") {
		t.Fatalf("signin into an existing org: %v", err)
	}
	if _, err := tally(t, "", append(carol, "signin", "--org-invite", tok)...); err == nil || !strings.Contains(err.Error(), "--org-invite needs --org") {
		t.Fatalf("--org-invite without --org: %v", err)
	}
	if _, err := tally(t, "", append(carol, "signin", "--org", "acme", "--org-invite", "skt_org_bogus")...); err == nil ||
		!strings.Contains(err.Error(), "invalid, expired, used up") {
		t.Fatalf("signin with a bad invite: %v", err)
	}
	out := mustTally(t, append(carol, "signin", "--org", "acme", "--org-invite", tok)...)
	if !strings.Contains(out, "signed in: org acme") {
		t.Fatalf("signin with an org invite: %s", out)
	}
	// The one use is spent.
	dave := []string{"--home", t.TempDir(), "--api-url", st.APIURL}
	mustTally(t, append(dave, "init")...)
	if _, err := tally(t, "", append(dave, "signin", "--org", "acme", "--org-invite", tok)...); err == nil || !strings.Contains(err.Error(), "ask an account of acme for a new one") {
		t.Fatalf("second use of a one-use invite: %v", err)
	}
	// Out of range values are refused with the ranges.
	if _, err := tally(t, "", append(alice, "org", "invite", "--uses", "101")...); err == nil || !strings.Contains(err.Error(), "1 to 100") {
		t.Fatalf("org invite --uses 101: %v", err)
	}
	if _, err := tally(t, "", append(alice, "org", "invite", "extra")...); err == nil {
		t.Fatal("org invite with an argument was accepted")
	}
}
