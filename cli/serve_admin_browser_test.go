package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's headless browser: the admin page's browser test
// skips without it, unless CI is set (.ci/run installs it), where it
// fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium), and CI is set")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// TestServeAdminPageInABrowser drives headless Chromium against a real
// tally serve on loopback: it signs in on the admin page with the
// internal secret, sees both planes ready, creates an account and sees
// its API key once, finds it listed, disables it, and takes a full-page
// screenshot (to $SKYTALE_ADMIN_SCREENSHOT, else a temporary folder).
func TestServeAdminPageInABrowser(t *testing.T) {
	exe := chromium(t)
	data := t.TempDir()
	p := serveInProcess(t, serveOptions{Data: data, MetricsAddr: "127.0.0.1:0"})
	b, err := os.ReadFile(filepath.Join(data, "internal_secret"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(b))

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, p.log)
		}
	}
	var health, key, accounts, done string
	run("sign in",
		chromedp.Navigate(p.metricsURL+"/admin"),
		chromedp.WaitVisible("#secret", chromedp.ByID),
		chromedp.SendKeys("#secret", secret, chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("#health", chromedp.ByID),
		chromedp.Text("#health", &health, chromedp.ByID),
	)
	for _, want := range []string{"directory", "relay", "ready"} {
		if !strings.Contains(health, want) {
			t.Errorf("the health section lacks %q: %q", want, health)
		}
	}
	if strings.Contains(health, "not ready") {
		t.Errorf("a plane is not ready: %q", health)
	}
	run("create an account",
		chromedp.SendKeys("#email", "dana@example.org", chromedp.ByID),
		chromedp.SendKeys("#org", "acme", chromedp.ByID),
		chromedp.Click("#create", chromedp.ByID),
		chromedp.WaitVisible("#apikey", chromedp.ByID),
		chromedp.Text("#apikey", &key, chromedp.ByID),
	)
	if !strings.HasPrefix(key, "sk_live_") {
		t.Fatalf("the key shown is %q", key)
	}
	run("see it listed",
		chromedp.Navigate(p.metricsURL+"/admin"),
		chromedp.WaitVisible("#accounts", chromedp.ByID),
		chromedp.Text("#accounts", &accounts, chromedp.ByID),
	)
	if !strings.Contains(accounts, "dana@example.org") || strings.Contains(accounts, key) {
		t.Fatalf("the accounts section: %q", accounts)
	}
	run("disable it",
		chromedp.Click("button.disable", chromedp.ByQuery),
		chromedp.WaitVisible("#done", chromedp.ByID),
		chromedp.Text("#done", &done, chromedp.ByID),
		chromedp.Text("#accounts", &accounts, chromedp.ByID),
	)
	if !strings.Contains(done, "Disabled") || !strings.Contains(accounts, "disabled") {
		t.Fatalf("after disabling: %q, %q", done, accounts)
	}
	// The key no longer mints tokens.
	if code := postJSON(t, p.apiURL+"/v1/tokens", key, map[string]any{}, nil); code != 401 && code != 403 {
		t.Errorf("the disabled account's key mints tokens: %d", code)
	}
	var shot []byte
	run("screenshot", chromedp.FullScreenshot(&shot, 100))
	path := os.Getenv("SKYTALE_ADMIN_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "admin.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the admin page: %s (%d bytes)", path, len(shot))
}
