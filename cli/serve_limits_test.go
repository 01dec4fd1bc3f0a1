package cli

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/skytale-oss/skytale/directory"
)

// TestServeRateLimitSettingsTakeEffect: a directory rate limit set to 1
// (by flag, by TALLY_SERVE_* and by the config file) refuses the second
// request of its kind with 429 rate_limited, and the relay's
// --relay-conns-per-account 1 refuses an account's second socket with
// too_many_connections.
func TestServeRateLimitSettingsTakeEffect(t *testing.T) {
	for _, c := range []struct {
		name string
		env  string
		args func(t *testing.T) []string
	}{
		{"flag", "", func(*testing.T) []string { return []string{"--directory-rate-token-per-account", "1/1h"} }},
		{"environment", "1/1h", func(*testing.T) []string { return nil }},
		{"file", "", func(t *testing.T) []string {
			return []string{"--config", writeConfig(t, `directory_rate_token_per_account = "1/1h"`+"\n")}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("TALLY_SERVE_DIRECTORY_RATE_TOKEN_PER_ACCOUNT", c.env)
			}
			s := startServe(t, t.TempDir(), append([]string{"--quiet"}, c.args(t)...)...)
			acct, _ := signUp(t, s.apiURL) // the account's one token
			var refused struct{ Error string }
			if code := postJSON(t, s.apiURL+"/v1/tokens", acct.APIKey, map[string]any{}, &refused); code != 429 || refused.Error != "rate_limited" {
				t.Fatalf("the second token: %d %q, want 429 rate_limited", code, refused.Error)
			}
			// Another account has its own bucket.
			if _, tok := signUpIn(t, s.apiURL, "dev@beta.test", "beta"); tok == "" {
				t.Fatal("another account got no token")
			}
		})
	}

	t.Run("relay", func(t *testing.T) {
		s := startServe(t, t.TempDir(), "--quiet", "--relay-conns-per-account", "1")
		_, tok := signUp(t, s.apiURL)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		relaySocket(ctx, t, s.relURL+"/ws", tok)
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.relURL, "http")+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := wsjson.Write(ctx, c, frame{Type: "auth", Token: tok}); err != nil {
			t.Fatal(err)
		}
		var got frame
		if err := wsjson.Read(ctx, c, &got); err != nil || got.Code != "too_many_connections" {
			t.Fatalf("the account's second socket: %+v %v, want too_many_connections", got, err)
		}
	})
}

// TestServeRateLimitSettingsParsed: a bucket is BURST/EVERY, BURST (the
// default pace) or off; anything else is a usage error naming the
// setting; check-config lists each with its source, flag over
// environment over file.
func TestServeRateLimitSettingsParsed(t *testing.T) {
	def := directory.DefaultLimits.Token.PerAccount
	for in, want := range map[string]directory.Bucket{
		"5/2s":     {Burst: 5, Every: 2 * time.Second},
		"7":        {Burst: 7, Every: def.Every},
		" 9 / 1m ": {Burst: 9, Every: time.Minute},
		"off":      {Burst: -1},
	} {
		if got, err := parseBucket(in, def); err != nil || got != want {
			t.Errorf("parseBucket(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1/1s", "5/0s", "5/soon", "lots"} {
		if _, err := parseBucket(bad, def); err == nil {
			t.Errorf("parseBucket(%q) took it", bad)
		}
	}
	if got := bucketText(directory.Bucket{Burst: 50, Every: time.Hour}); got != "50/1h" {
		t.Errorf("bucketText of 50 an hour: %q", got)
	}
	ctx := context.Background()
	if code, _, errw := mainOut(ctx, "", "serve", "--directory-rate-claim-per-ip", "many", "check-config"); code != exitUsage || !strings.Contains(errw, "directory-rate-claim-per-ip") {
		t.Errorf("a bad bucket: exit %d, %q", code, errw)
	}
	file := writeConfig(t, "directory_rate_join_per_ip = \"3/1s\"\ndirectory_rate_tree_per_account = \"4/1s\"\nrelay_conns_per_account = 2\n")
	t.Setenv("TALLY_SERVE_DIRECTORY_RATE_TREE_PER_ACCOUNT", "5/1s")
	t.Setenv("TALLY_SERVE_RELAY_CONNS_PER_ACCOUNT", "6")
	code, out, errw := mainOut(ctx, "", "serve", "--relay-conns-per-account", "7", "check-config", "--config", file)
	if code != 0 {
		t.Fatalf("check-config: exit %d, %q", code, errw)
	}
	for _, want := range []string{
		`directory_rate_join_per_ip = "3/1s"  # ` + file,
		`directory_rate_tree_per_account = "5/1s"  # TALLY_SERVE_DIRECTORY_RATE_TREE_PER_ACCOUNT`,
		`relay_conns_per_account = 7  # flag`,
		`directory_rate_token_per_ip = "300/200ms"  # default`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("check-config does not say %q:\n%s", want, out)
		}
	}
}

// TestReadmeListsEveryRateLimit: the operators' table of rate limits
// names every kind with its defaults.
func TestReadmeListsEveryRateLimit(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	d := directory.DefaultLimits
	for _, r := range rateSettings {
		def := *r.rate(&d)
		row := regexp.MustCompile("(?m)^\\| `" + r.kind + "` \\| [^|]+ \\| " + regexp.QuoteMeta(bucketText(def.PerAddr)) + " \\| " + regexp.QuoteMeta(bucketText(def.PerAccount)) + " \\|$")
		if !row.Match(b) {
			t.Errorf("README.md has no rate-limit row for %s with %s and %s", r.kind, bucketText(def.PerAddr), bucketText(def.PerAccount))
		}
	}
}
