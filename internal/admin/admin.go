package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Plane is one plane the page reports on.
type Plane struct {
	Name string
	// Ready is the plane's readiness (what its GET /ready answers).
	Ready func(context.Context) error
}

// Config is what the page shows and whom it lets in.
type Config struct {
	// Secret is the internal secret: the only credential of the page.
	Secret []byte
	Planes []Plane
	// Accounts are the directory's; nil when this process runs no
	// directory (the page then has no accounts section).
	Accounts Accounts
	// Metrics are read for the counts, quota use and refusals; nil
	// leaves them out.
	Metrics prometheus.Gatherer
	// Errors are the last error log records; nil leaves them out.
	Errors *ErrorRing
	// Version names the build (module version and VCS revision).
	Version string
	// Started is when the process started, for the uptime.
	Started time.Time
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Handler serves the page under /admin:
//
//	GET  /admin                   the page (401 with the login form without the secret)
//	GET  /admin/login             the login form
//	POST /admin/login             takes the secret, sets the session cookie
//	POST /admin/logout            ends the session
//	POST /admin/accounts          creates an account, shows its API key once
//	POST /admin/accounts/disable  disables an account
//
// Who: the holder of the internal secret, by an Authorization: Bearer
// header or by the session cookie the login form sets; anyone else gets
// 401 and the login form, which says nothing of the server. On whom: the
// accounts of the directory. A POST with the cookie must carry the
// session's CSRF token (the forms hold it), the login form its own
// one-use token, and a POST a browser marks cross-site (Sec-Fetch-Site)
// is refused whatever it carries; a Bearer header is never sent by a
// browser on its own, so it needs no token. How much: at most
// maxSessions sessions (a new one pushes out the oldest) and
// maxLogins pending login forms, each a few dozen bytes; an answer is one
// page of at most pageSize accounts.
type Handler struct {
	cfg Config
	mux *http.ServeMux

	mu       sync.Mutex
	sessions map[[32]byte]*session // by the hash of the cookie's value
	logins   map[[32]byte]time.Time
}

type session struct {
	csrf    string
	expires time.Time
}

const (
	sessionCookie = "skytale_admin"
	loginCookie   = "skytale_admin_login"
	sessionTTL    = 8 * time.Hour
	loginTTL      = 10 * time.Minute
	maxSessions   = 64
	maxLogins     = 256
	pageSize      = 100
	// maxForm bounds the body of a POST.
	maxForm = 8 << 10
)

// New makes the page's handler.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Started.IsZero() {
		cfg.Started = cfg.Now()
	}
	h := &Handler{cfg: cfg, sessions: map[[32]byte]*session{}, logins: map[[32]byte]time.Time{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /admin", h.page)
	m.HandleFunc("GET /admin/{$}", h.page)
	m.HandleFunc("GET /admin/login", h.loginForm)
	m.HandleFunc("POST /admin/login", h.login)
	m.HandleFunc("POST /admin/logout", h.logout)
	m.HandleFunc("POST /admin/accounts", h.create)
	m.HandleFunc("POST /admin/accounts/disable", h.disable)
	h.mux = m
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	// No script runs on the page, and nothing it shows may load one.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.mux.ServeHTTP(w, r)
}

// who is the caller's session (nil with a Bearer header), and whether the
// caller holds the secret.
func (h *Handler) who(r *http.Request) (*session, bool) {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return nil, h.isSecret(v)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	k := sha256.Sum256([]byte(c.Value))
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[k]
	if s == nil {
		return nil, false
	}
	if h.cfg.Now().After(s.expires) {
		delete(h.sessions, k)
		return nil, false
	}
	return s, true
}

// isSecret compares v with the secret in constant time (both hashed
// first, so not even the length shows).
func (h *Handler) isSecret(v string) bool {
	a, b := sha256.Sum256([]byte(v)), sha256.Sum256(h.cfg.Secret)
	return len(h.cfg.Secret) > 0 && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// postAllowed checks a POST: not marked cross-site by the browser, and
// with the cookie, the session's CSRF token in the form. It answers the
// refusal itself.
func (h *Handler) postAllowed(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if r.ParseForm() != nil {
		h.refuse(w, http.StatusBadRequest, "the form could not be read")
		return false
	}
	if crossSite(r) {
		h.refuse(w, http.StatusForbidden, "a form from another site was refused")
		return false
	}
	s, ok := h.who(r)
	if !ok {
		h.unauthorized(w, r, "")
		return false
	}
	if s != nil && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
		h.refuse(w, http.StatusForbidden, "the form is stale or from elsewhere: reload the page and try again")
		return false
	}
	return true
}

// crossSite reports a request the browser says another site made.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return false
	}
	return true
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	h.showLogin(w, r, http.StatusOK, "")
}

// showLogin answers the login form with a fresh login token, in a cookie
// and in the form.
func (h *Handler) showLogin(w http.ResponseWriter, r *http.Request, code int, msg string) {
	tok := randomToken()
	now := h.cfg.Now()
	h.mu.Lock()
	for k, exp := range h.logins {
		if now.After(exp) {
			delete(h.logins, k)
		}
	}
	if len(h.logins) >= maxLogins {
		// A flood of login forms pushes out others' forms, never
		// memory: the one that loses reloads.
		for k := range h.logins {
			delete(h.logins, k)
			break
		}
	}
	h.logins[sha256.Sum256([]byte(tok))] = now.Add(loginTTL)
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: tok, Path: "/admin/login", MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	render(w, code, loginTemplate, loginView{Token: tok, Message: msg})
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if r.ParseForm() != nil {
		h.refuse(w, http.StatusBadRequest, "the form could not be read")
		return
	}
	if crossSite(r) {
		h.refuse(w, http.StatusForbidden, "a form from another site was refused")
		return
	}
	// The login form's token: in the form and in the cookie set with it,
	// and one this handler gave out (once).
	// A token is used up by any try, with its cookie or not.
	tok := r.PostForm.Get("login")
	live := tok != "" && h.takeLogin(tok)
	c, err := r.Cookie(loginCookie)
	if err != nil || !live || subtle.ConstantTimeCompare([]byte(c.Value), []byte(tok)) != 1 {
		h.showLogin(w, r, http.StatusForbidden, "The form expired: enter the secret again.")
		return
	}
	if !h.isSecret(strings.TrimSpace(r.PostForm.Get("secret"))) {
		h.showLogin(w, r, http.StatusUnauthorized, "That is not the internal secret.")
		return
	}
	id := randomToken()
	now := h.cfg.Now()
	h.mu.Lock()
	for k, s := range h.sessions {
		if now.After(s.expires) {
			delete(h.sessions, k)
		}
	}
	if len(h.sessions) >= maxSessions {
		var oldest [32]byte
		var at time.Time
		for k, s := range h.sessions {
			if at.IsZero() || s.expires.Before(at) {
				oldest, at = k, s.expires
			}
		}
		delete(h.sessions, oldest)
	}
	h.sessions[sha256.Sum256([]byte(id))] = &session{csrf: randomToken(), expires: now.Add(sessionTTL)}
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/admin/login", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/admin", MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
}

// takeLogin uses up a login token, reporting whether it was a live one.
func (h *Handler) takeLogin(tok string) bool {
	k := sha256.Sum256([]byte(tok))
	h.mu.Lock()
	defer h.mu.Unlock()
	exp, ok := h.logins[k]
	delete(h.logins, k)
	return ok && !h.cfg.Now().After(exp)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if !h.postAllowed(w, r) {
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		h.mu.Lock()
		delete(h.sessions, sha256.Sum256([]byte(c.Value)))
		h.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/admin", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	s, ok := h.who(r)
	if !ok {
		h.unauthorized(w, r, "")
		return
	}
	h.show(w, r, s, http.StatusOK, pageNotes{})
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	if !h.postAllowed(w, r) {
		return
	}
	s, _ := h.who(r)
	if h.cfg.Accounts == nil {
		h.show(w, r, s, http.StatusNotFound, pageNotes{Problem: "This process runs no directory."})
		return
	}
	email, org := strings.TrimSpace(r.PostForm.Get("email")), strings.TrimSpace(r.PostForm.Get("org"))
	a, key, err := h.cfg.Accounts.Create(r.Context(), email, org)
	if err != nil {
		h.show(w, r, s, statusOf(err), pageNotes{Problem: "The account was not created: " + err.Error()})
		return
	}
	h.show(w, r, s, http.StatusCreated, pageNotes{Created: &created{Account: a, APIKey: key}})
}

func (h *Handler) disable(w http.ResponseWriter, r *http.Request) {
	if !h.postAllowed(w, r) {
		return
	}
	s, _ := h.who(r)
	if h.cfg.Accounts == nil {
		h.show(w, r, s, http.StatusNotFound, pageNotes{Problem: "This process runs no directory."})
		return
	}
	id := strings.TrimSpace(r.PostForm.Get("account_id"))
	if err := h.cfg.Accounts.Disable(r.Context(), id); err != nil {
		h.show(w, r, s, statusOf(err), pageNotes{Problem: "The account was not disabled: " + err.Error()})
		return
	}
	h.show(w, r, s, http.StatusOK, pageNotes{Done: "Disabled account " + id + ": its keys and tokens no longer work."})
}

// statusOf is the status a refusal of the directory is answered with.
func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
		return ae.Status
	}
	return http.StatusInternalServerError
}

// unauthorized answers 401 with the login form.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="skytale admin"`)
	h.showLogin(w, r, http.StatusUnauthorized, msg)
}

// refuse answers a refusal as a short page that says nothing of the
// server.
func (h *Handler) refuse(w http.ResponseWriter, code int, msg string) {
	render(w, code, refusedTemplate, msg)
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
