package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/directory/dirmetrics"
	"github.com/skytale-oss/skytale/internal/admin"
)

const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// page is an admin page over a real in-memory directory, on loopback.
type page struct {
	srv  *httptest.Server
	dir  *directory.Server
	ring *admin.ErrorRing
	log  *slog.Logger
}

func newPage(t *testing.T, logClients bool) *page {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := directory.New(context.Background(), directory.Config{JWTSecret: []byte("jwt-secret-jwt-secret-jwt-secret"), InternalSecret: []byte(secret), Metrics: dirmetrics.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	ring := admin.NewErrorRing(4, logClients)
	h := admin.New(admin.Config{
		Secret:   []byte(secret),
		Planes:   []admin.Plane{{Name: "directory", Ready: d.Ready}, {Name: "relay", Ready: func(context.Context) error { return errors.New("waiting for NATS") }}},
		Accounts: admin.DirectoryAccounts(d, []byte(secret)),
		Metrics:  reg,
		Errors:   ring,
		Version:  "v1.2.3 (commit 0123abcd)",
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &page{srv: srv, dir: d, ring: ring, log: slog.New(ring.Handler(slog.DiscardHandler))}
}

// browser is a client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, u, bearer string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	loginRE = regexp.MustCompile(`name="login" value="([^"]+)"`)
	csrfRE  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	keyRE   = regexp.MustCompile(`<code id="apikey">([^<]+)</code>`)
)

// signIn logs c in through the form and returns the page's CSRF token.
func signIn(t *testing.T, p *page, c *http.Client) string {
	t.Helper()
	_, form := do(t, c, "GET", p.srv.URL+"/admin/login", "", nil)
	m := loginRE.FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("no login token in the form:\n%s", form)
	}
	code, _ := do(t, c, "POST", p.srv.URL+"/admin/login", "", url.Values{"login": {m[1]}, "secret": {secret}})
	if code != http.StatusSeeOther {
		t.Fatalf("login: %d", code)
	}
	code, body := do(t, c, "GET", p.srv.URL+"/admin", "", nil)
	if code != 200 {
		t.Fatalf("the page after login: %d", code)
	}
	m = csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	return m[1]
}

// TestAdminRefusesStrangers: without the secret, with a wrong one (as a
// header or in the form), and with a session cookie this page never gave
// out (another run's), the page is 401 with the login form, which names
// nothing of the server; POSTs do nothing.
func TestAdminRefusesStrangers(t *testing.T) {
	p := newPage(t, false)
	// An account the stranger must not see.
	if _, _, err := admin.DirectoryAccounts(p.dir, []byte(secret)).Create(context.Background(), "alice@example.org", "acme"); err != nil {
		t.Fatal(err)
	}
	leaks := []string{"alice@example.org", "acme", "v1.2.3", "directory", "/metrics", "csrf"}
	check := func(what string, code int, body string) {
		t.Helper()
		if code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", what, code)
		}
		for _, l := range leaks {
			if strings.Contains(body, l) {
				t.Errorf("%s: the answer holds %q:\n%s", what, l, body)
			}
		}
	}
	c := browser(t)
	code, body := do(t, c, "GET", p.srv.URL+"/admin", "", nil)
	check("no secret", code, body)
	code, body = do(t, c, "GET", p.srv.URL+"/admin", "wrong", nil)
	check("a wrong Bearer secret", code, body)
	code, body = do(t, c, "GET", p.srv.URL+"/admin", secret[:len(secret)-1], nil)
	check("the secret less its last character", code, body)

	_, form := do(t, c, "GET", p.srv.URL+"/admin/login", "", nil)
	tok := loginRE.FindStringSubmatch(form)[1]
	code, body = do(t, c, "POST", p.srv.URL+"/admin/login", "", url.Values{"login": {tok}, "secret": {"wrong"}})
	check("a wrong secret in the form", code, body)

	// Another run's cookie: a session of another page (same secret).
	other := newPage(t, false)
	oc := browser(t)
	signIn(t, other, oc)
	u, _ := url.Parse(other.srv.URL)
	stolen := oc.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/admin"})
	if len(stolen) == 0 {
		t.Fatal("the other page set no session cookie")
	}
	req, _ := http.NewRequest("GET", p.srv.URL+"/admin", nil)
	req.AddCookie(stolen[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check("another run's session cookie", resp.StatusCode, string(b))

	for _, path := range []string{"/admin/accounts", "/admin/accounts/disable"} {
		code, body = do(t, browser(t), "POST", p.srv.URL+path, "", url.Values{"email": {"mallory@example.org"}, "org": {"evil"}, "account_id": {"x"}})
		check("POST "+path+" without the secret", code, body)
	}
	as, _, err := admin.DirectoryAccounts(p.dir, []byte(secret)).List(context.Background(), "", 10)
	if err != nil || len(as) != 1 {
		t.Fatalf("the strangers' POSTs changed the accounts: %v %v", as, err)
	}
}

// TestAdminLoginFormNeedsItsToken: a login POST without the form's token
// (a login CSRF), with a token of another browser, or with one used
// before is refused even with the right secret, and sets no session.
func TestAdminLoginFormNeedsItsToken(t *testing.T) {
	p := newPage(t, false)
	c := browser(t)
	code, _ := do(t, c, "POST", p.srv.URL+"/admin/login", "", url.Values{"secret": {secret}})
	if code != http.StatusForbidden {
		t.Errorf("login without the form's token: %d, want 403", code)
	}
	_, form := do(t, c, "GET", p.srv.URL+"/admin/login", "", nil)
	tok := loginRE.FindStringSubmatch(form)[1]
	code, _ = do(t, browser(t), "POST", p.srv.URL+"/admin/login", "", url.Values{"login": {tok}, "secret": {secret}})
	if code != http.StatusForbidden {
		t.Errorf("login with another browser's token: %d, want 403", code)
	}
	if code, _ := do(t, c, "POST", p.srv.URL+"/admin/login", "", url.Values{"login": {tok}, "secret": {secret}}); code != http.StatusForbidden {
		t.Errorf("login with a token already tried elsewhere: %d, want 403", code)
	}
	if code, _ := do(t, c, "GET", p.srv.URL+"/admin", "", nil); code != http.StatusUnauthorized {
		t.Errorf("the page after refused logins: %d, want 401", code)
	}
}

// TestAdminPostsNeedTheCSRFToken: a signed-in browser's POST without the
// session's token, with another session's, or marked cross-site by the
// browser creates and disables nothing.
func TestAdminPostsNeedTheCSRFToken(t *testing.T) {
	p := newPage(t, false)
	c := browser(t)
	csrf := signIn(t, p, c)
	other := signIn(t, p, browser(t))
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  string
	}{
		{"no token", url.Values{"email": {"m@example.org"}, "org": {"evil"}}, ""},
		{"another session's token", url.Values{"csrf": {other}, "email": {"m@example.org"}, "org": {"evil"}}, ""},
		{"a cross-site form with the right token", url.Values{"csrf": {csrf}, "email": {"m@example.org"}, "org": {"evil"}}, "cross-site"},
	} {
		req, _ := http.NewRequest("POST", p.srv.URL+"/admin/accounts", strings.NewReader(tc.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.hdr != "" {
			req.Header.Set("Sec-Fetch-Site", tc.hdr)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, resp.StatusCode)
		}
	}
	if as, _, _ := admin.DirectoryAccounts(p.dir, []byte(secret)).List(context.Background(), "", 10); len(as) != 0 {
		t.Fatalf("a refused POST created %v", as)
	}
	// With the token it works, and signing out ends the session.
	code, body := do(t, c, "POST", p.srv.URL+"/admin/accounts", "", url.Values{"csrf": {csrf}, "email": {"bob@example.org"}, "org": {"acme"}})
	if code != http.StatusCreated || keyRE.FindStringSubmatch(body) == nil {
		t.Fatalf("create with the token: %d\n%s", code, body)
	}
	if code, _ := do(t, c, "POST", p.srv.URL+"/admin/logout", "", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := do(t, c, "GET", p.srv.URL+"/admin", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("the page after logout: %d, want 401", code)
	}
}

// TestAdminEscapesPeerText: an account's e-mail that holds HTML (the
// directory takes any e-mail without spaces; an org's characters are
// too few for markup) and an error record that does are shown as text,
// never markup.
func TestAdminEscapesPeerText(t *testing.T) {
	p := newPage(t, false)
	evil := `<script>alert(1)</script>"><img/src=x/onerror=alert(2)>`
	if _, _, err := admin.DirectoryAccounts(p.dir, []byte(secret)).Create(context.Background(), evil+"@example.org", "acme"); err != nil {
		t.Fatalf("the directory refused the e-mail: %v", err)
	}
	p.log.Error("a failure", "err", errors.New("bad "+evil))
	code, body := do(t, browser(t), "GET", p.srv.URL+"/admin", secret, nil)
	if code != 200 {
		t.Fatalf("page: %d", code)
	}
	for _, bad := range []string{"<script>", "<img/src=x"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	if n := strings.Count(body, "&lt;script&gt;alert(1)&lt;/script&gt;"); n != 2 {
		t.Errorf("the hostile text is on the page, escaped, %d times, want 2 (the e-mail and the error):\n%s", n, body)
	}
}

// TestAdminShowsThePlanesAndAccounts: with the Bearer secret the page
// shows both planes' readiness, the version, the counts from the metrics
// and the accounts; an account created shows its key once, and disabled
// it is listed as such.
func TestAdminShowsThePlanesAndAccounts(t *testing.T) {
	p := newPage(t, false)
	c := browser(t)
	code, body := do(t, c, "POST", p.srv.URL+"/admin/accounts", secret, url.Values{"email": {"carol@example.org"}, "org": {"acme"}})
	m := keyRE.FindStringSubmatch(body)
	if code != http.StatusCreated || m == nil || !strings.HasPrefix(m[1], "sk_live_") {
		t.Fatalf("create: %d\n%s", code, body)
	}
	code, body = do(t, c, "GET", p.srv.URL+"/admin", secret, nil)
	if code != 200 {
		t.Fatalf("page: %d", code)
	}
	for _, want := range []string{"carol@example.org", "v1.2.3 (commit 0123abcd)", "waiting for NATS", "ready", `href="/metrics"`, "Rate-limit", "directory: bytes kept for clients"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, m[1]) {
		t.Error("the API key is shown again on the page")
	}
	as, _, err := admin.DirectoryAccounts(p.dir, []byte(secret)).List(context.Background(), "", 10)
	if err != nil || len(as) != 1 {
		t.Fatal(as, err)
	}
	code, _ = do(t, c, "POST", p.srv.URL+"/admin/accounts/disable", secret, url.Values{"account_id": {as[0].ID}})
	if code != 200 {
		t.Fatalf("disable: %d", code)
	}
	_, body = do(t, c, "GET", p.srv.URL+"/admin", secret, nil)
	if !strings.Contains(body, `<span class="bad">disabled</span>`) {
		t.Errorf("the disabled account is not listed as disabled:\n%s", body)
	}
	// The disabled key no longer mints tokens.
	req, _ := http.NewRequest("POST", "/v1/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+m[1])
	rec := httptest.NewRecorder()
	p.dir.ServeHTTP(rec, req)
	if rec.Code/100 == 2 {
		t.Errorf("the disabled account's key still mints tokens: %d", rec.Code)
	}
}

// TestAdminErrorRingNamesNoOne: the recent errors keep at most their
// bound, newest first, and drop client addresses, account ids and
// channels unless the page was made to name clients.
func TestAdminErrorRingNamesNoOne(t *testing.T) {
	for _, clients := range []bool{false, true} {
		ring := admin.NewErrorRing(3, clients)
		log := slog.New(ring.Handler(slog.DiscardHandler)).With("plane", "relay")
		log.Info("not an error", "remote", "192.0.2.7:5555")
		for i := range 5 {
			log.Error("failure", "n", i, "remote", "192.0.2.7:5555", "sub", "acct-1", "channel", "acme/a/b")
		}
		recs, total := ring.Recent()
		if len(recs) != 3 || total != 5 {
			t.Fatalf("kept %d of %d, want 3 of 5", len(recs), total)
		}
		if !strings.Contains(recs[0].Attrs, "n=4") || !strings.Contains(recs[2].Attrs, "n=2") || !strings.Contains(recs[0].Attrs, "plane=relay") {
			t.Errorf("not newest first, or attributes lost: %+v", recs)
		}
		for _, r := range recs {
			named := strings.Contains(r.Attrs, "192.0.2.7") || strings.Contains(r.Attrs, "acct-1") || strings.Contains(r.Attrs, "acme/a/b")
			if named != clients {
				t.Errorf("clients=%v: the record %q", clients, r.Attrs)
			}
		}
	}
}
