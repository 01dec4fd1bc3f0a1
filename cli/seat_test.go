package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// tally runs the command tree in-process and returns stdout.
func tally(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	err := run(context.Background(), append([]string{"tally"}, args...), strings.NewReader(stdin), &out, &errw)
	return out.String(), err
}

func mustTally(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tally(t, "", args...)
	if err != nil {
		t.Fatalf("tally %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func TestCLILogSync(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := t.TempDir()
	g := []string{"--home", home}
	mustTally(t, append(g, "config", "set", "api_url", st.APIURL)...)
	mustTally(t, append(g, "config", "set", "relay_url", st.RelayURL)...)

	var id struct{ Identity string }
	json.Unmarshal([]byte(mustTally(t, append(g, "--json", "init")...)), &id)
	if !strings.HasPrefix(id.Identity, "did:key:z") {
		t.Fatalf("init printed %+v", id)
	}
	if _, err := tally(t, "", append(g, "connect")...); err == nil || !strings.Contains(err.Error(), "tally signin") {
		t.Fatalf("connect before signin: %v", err)
	}
	mustTally(t, append(g, "signin", "--org", "acme")...)
	if out := mustTally(t, append(g, "connect")...); !strings.Contains(out, "acme/tally/") {
		t.Fatalf("connect: %s", out)
	}
	mustTally(t, append(g, "add", "buy", "milk")...)
	mustTally(t, append(g, "add", "call mum")...)
	if out := mustTally(t, append(g, "push")...); !strings.Contains(out, "pushed 2 entries") {
		t.Fatalf("push: %s", out)
	}
	out := mustTally(t, append(g, "log")...)
	if !strings.Contains(out, "buy milk") || !strings.Contains(out, "call mum") {
		t.Fatalf("log: %s", out)
	}
	if out := mustTally(t, append(g, "--json", "pull")...); strings.TrimSpace(out) != `{"new":0}` {
		t.Fatalf("pull: %s", out)
	}

	// backup asks first.
	if _, err := tally(t, "n\n", append(g, "backup")...); err == nil {
		t.Fatal("backup without confirmation showed the words")
	}
	words := strings.Fields(mustTally(t, append(g, "backup", "--yes")...))
	if len(words) != 24 {
		t.Fatalf("backup printed %d words", len(words))
	}
	if out, err := tally(t, "yes\n", append(g, "backup")...); err != nil || len(strings.Fields(out)) != 24 {
		t.Fatalf("confirmed backup: %v", err)
	}
}

func TestCLIConfigPrecedence(t *testing.T) {
	home := t.TempDir()
	g := []string{"--home", home}
	mustTally(t, append(g, "config", "set", "api_url", "http://127.0.0.1:1")...)
	if out := mustTally(t, append(g, "config", "get", "api_url")...); strings.TrimSpace(out) != "http://127.0.0.1:1" {
		t.Fatalf("get: %q", out)
	}
	for _, bad := range [][]string{
		{"config", "set", "api_url", "http://example.com"},
		{"config", "set", "nonsense", "x"},
		{"config", "set", "cover_traffic", "maybe"},
		{"config", "set", "cover_interval", "fast"},
		{"config", "set", "cover_interval", "10ms"},
		{"config", "set", "cover_lifetime", "10ms"},
		{"config", "set", "cover_lifetime", "soon"},
		{"config", "get", "nonsense"},
	} {
		if _, err := tally(t, "", append(g, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if out := mustTally(t, append(g, "--json", "config", "set", "cover_traffic", "off")...); strings.TrimSpace(out) != `{"key":"cover_traffic","value":"off"}` {
		t.Fatalf("config set --json: %q", out)
	}
	mustTally(t, append(g, "config", "set", "cover_interval", "30s")...)
	mustTally(t, append(g, "config", "set", "cover_lifetime", "3m")...)
	out := mustTally(t, append(g, "config", "list")...)
	if !strings.Contains(out, "api_url = http://127.0.0.1:1") || !strings.Contains(out, "cover_traffic = off") || !strings.Contains(out, "cover_interval = 30s") || !strings.Contains(out, "cover_lifetime = 3m") {
		t.Fatalf("list: %s", out)
	}

	// flag > env > config, observed through the URL a failing signin uses.
	testOnlyEnv = map[string]string{"SKYTALE_API_URL": "http://127.0.0.1:2"}
	defer func() { testOnlyEnv = nil }()
	mustTally(t, append(g, "init")...)
	_, err := tally(t, "", append(g, "signin")...)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Fatalf("env did not beat config: %v", err)
	}
	// TALLY_API_URL is the name; the older SKYTALE_API_URL is its alias.
	testOnlyEnv["TALLY_API_URL"] = "http://127.0.0.1:4"
	if _, err := tally(t, "", append(g, "signin")...); err == nil || !strings.Contains(err.Error(), "127.0.0.1:4") {
		t.Fatalf("TALLY_API_URL did not beat its alias: %v", err)
	}
	_, err = tally(t, "", append(g, "--api-url", "http://127.0.0.1:3", "signin")...)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:3") {
		t.Fatalf("flag did not beat env: %v", err)
	}
	if _, err := tally(t, "", append(g, "--api-url", "http://example.com", "signin")...); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("plain http to a remote host: %v", err)
	}
}

// TestCLIRevokedAccount: after the account is revoked, commands that reach
// the directory or the relay fail with a clear reason; the local log still
// works.
func TestCLIRevokedAccount(t *testing.T) {
	st := skytaletest.NewStack(t)
	g := []string{"--home", t.TempDir(), "--api-url", st.APIURL, "--relay-url", st.RelayURL}
	mustTally(t, append(g, "init")...)
	var acct struct {
		AccountID string `json:"account_id"`
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(g, "--json", "signin", "--org", "acme")...)), &acct); err != nil || acct.AccountID == "" {
		t.Fatalf("signin: %+v %v", acct, err)
	}
	mustTally(t, append(g, "connect")...)
	mustTally(t, append(g, "add", "before")...)
	mustTally(t, append(g, "push")...)
	mustTally(t, append(g, "room", "create", "ops")...)

	// The operator revokes the account.
	op := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: string(st.InternalSecret)}
	if err := op.Revoke(context.Background(), acct.AccountID); err != nil {
		t.Fatal(err)
	}

	mustTally(t, append(g, "add", "after")...)
	for _, args := range [][]string{
		{"push"}, {"pull"}, {"msg", "ops", "hello"}, {"room", "invite", "ops"}, {"room", "admit", "ops"}, {"connect"},
	} {
		_, err := tally(t, "", append(g, args...)...)
		if err == nil || !strings.Contains(err.Error(), "this account has been revoked") || !strings.Contains(err.Error(), "tally signin") {
			t.Errorf("tally %s after revocation: %v", strings.Join(args, " "), err)
		}
	}
	if out := mustTally(t, append(g, "log")...); !strings.Contains(out, "after") {
		t.Fatalf("log: %s", out)
	}
}

// TestCLIUsageErrors: an unknown command or flag exits non-zero with one
// line on stderr and nothing on stdout.
func TestCLIUsageErrors(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "tally bogus": see ` + "`tally --help`"},
		{[]string{"room", "bogus"}, `unknown command "tally room bogus"`},
		{[]string{"config", "frob"}, `unknown command "tally config frob"`},
		{[]string{"devices", "nope"}, `unknown command "tally devices nope"`},
		{[]string{"--bogus", "init"}, "unknown flag --bogus"},
		{[]string{"room", "invite", "x", "--bogus"}, "unknown flag --bogus"},
	} {
		var out, errw bytes.Buffer
		args := append([]string{"tally", "--home", home}, c.args...)
		if code := Main(context.Background(), args, strings.NewReader(""), &out, &errw); code == 0 {
			t.Errorf("tally %s exited 0", strings.Join(c.args, " "))
		}
		if out.Len() != 0 {
			t.Errorf("tally %s printed on stdout:\n%s", strings.Join(c.args, " "), out.String())
		}
		if e := errw.String(); strings.Count(e, "\n") != 1 || !strings.Contains(e, c.want) {
			t.Errorf("tally %s: stderr %q, want one line with %q", strings.Join(c.args, " "), e, c.want)
		}
	}
	// A group without a subcommand shows its help.
	if out := mustTally(t, "--home", home, "room"); !strings.Contains(out, "invite") {
		t.Errorf("tally room: %s", out)
	}
}

// TestCLIHome: --home beats TALLY_HOME, which beats ~/.tally; init writes
// the phrase there with mode 0600 and prints only the identity.
func TestCLIHome(t *testing.T) {
	envHome, flagHome := t.TempDir(), t.TempDir()
	testOnlyEnv = map[string]string{"TALLY_HOME": envHome}
	defer func() { testOnlyEnv = nil }()
	out := mustTally(t, "init")
	fi, err := os.Stat(filepath.Join(envHome, "phrase"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("phrase in TALLY_HOME: %v %v", fi, err)
	}
	words := strings.Fields(mustTally(t, "backup", "--yes"))
	if len(words) != 24 {
		t.Fatalf("backup printed %d words", len(words))
	}
	for i := 0; i+1 < len(words); i++ {
		if strings.Contains(out, words[i]+" "+words[i+1]) {
			t.Fatalf("init printed words of the phrase: %q", out)
		}
	}
	mustTally(t, "--home", flagHome, "init")
	if _, err := os.Stat(filepath.Join(flagHome, "phrase")); err != nil {
		t.Fatalf("--home did not beat TALLY_HOME: %v", err)
	}
	if again := strings.Fields(mustTally(t, "--home", flagHome, "backup", "--yes")); strings.Join(again, " ") == strings.Join(words, " ") {
		t.Fatal("two homes share a phrase")
	}

	// Neither: ~/.tally.
	userHome := t.TempDir()
	t.Setenv("HOME", userHome)
	testOnlyEnv = map[string]string{"TALLY_HOME": ""}
	mustTally(t, "init")
	if _, err := os.Stat(filepath.Join(userHome, ".tally", "phrase")); err != nil {
		t.Fatalf("default home: %v", err)
	}
}

// cancelOn cancels a context once a write contains a marker.
type cancelOn struct {
	syncBuffer
	marker string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.marker) {
		w.cancel()
	}
	return n, err
}

// TestCLIPullInterrupted: a pull interrupted after its first page keeps
// what it merged, says so, and the next pull goes on.
func TestCLIPullInterrupted(t *testing.T) {
	st := skytaletest.NewStack(t)
	home, _, acct := newHomeWithKey(t, st, "acme")
	g := append(home, "--api-url", st.APIURL, "--relay-url", st.RelayURL)
	var conn struct{ Channel string }
	if err := json.Unmarshal([]byte(mustTally(t, append(g, "--json", "connect")...)), &conn); err != nil {
		t.Fatal(err)
	}
	// More than one page of entries on the sync channel: foreign bytes,
	// which a pull skips, then a real batch. They come from the account
	// itself: the relay takes no one else's publishes on its channel.
	tok := st.Token(t, acct.APIKey)
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	c, err := rc.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe(context.Background(), conn.Channel); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ {
		if _, err := c.Publish(context.Background(), conn.Channel, []byte("not a sealed batch")); err != nil {
			t.Fatal(err)
		}
	}
	mustTally(t, append(g, "add", "after the noise")...)
	mustTally(t, append(g, "push")...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &cancelOn{marker: "pulled up to seq 500", cancel: cancel}
	var out bytes.Buffer
	err = run(ctx, append([]string{"tally"}, append(g, "pull")...), strings.NewReader(""), &out, errw)
	if !errors.Is(err, context.Canceled) || !strings.Contains(errw.String(), "stopped at seq 500 with 0 new entries merged; run `tally pull` again") {
		t.Fatalf("interrupted pull: %v, stderr %q", err, errw.String())
	}
	// The next pull starts after the first page.
	out.Reset()
	var errw2 bytes.Buffer
	if err := run(context.Background(), append([]string{"tally"}, append(g, "pull")...), strings.NewReader(""), &out, &errw2); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errw2.String(), "seq 500") || !strings.Contains(errw2.String(), "pulled up to seq 601") || !strings.Contains(out.String(), "pulled 0 new entries") {
		t.Fatalf("pull after the interruption: %q, stderr %q", out.String(), errw2.String())
	}
}
