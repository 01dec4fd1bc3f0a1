package admin

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// pageNotes are what an action adds to the page.
type pageNotes struct {
	Created *created
	Done    string
	Problem string
}

type created struct {
	Account Account
	APIKey  string
}

type planeView struct {
	Name  string
	Ready bool
	Why   string
}

type countView struct {
	Name  string
	Value string
}

type pageView struct {
	pageNotes
	CSRF        string // "" for a Bearer caller: no forms need it
	Version     string
	Uptime      string
	Started     string
	Planes      []planeView
	HasAccounts bool
	Accounts    []Account
	AccountsErr string
	After, Next string
	Counts      []countView
	Quota       []countView
	Refusals    []countView
	HasErrors   bool
	Errors      []ErrorRecord
	ErrorsTotal uint64
}

// show renders the page for s (nil: a Bearer caller).
func (h *Handler) show(w http.ResponseWriter, r *http.Request, s *session, code int, notes pageNotes) {
	now := h.cfg.Now()
	v := pageView{pageNotes: notes, Version: h.cfg.Version,
		Uptime:  (now.Sub(h.cfg.Started) / time.Second * time.Second).String(),
		Started: h.cfg.Started.UTC().Format(time.RFC3339)}
	if s != nil {
		v.CSRF = s.csrf
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	for _, p := range h.cfg.Planes {
		pv := planeView{Name: p.Name, Ready: true}
		if err := p.Ready(ctx); err != nil {
			pv.Ready, pv.Why = false, err.Error()
		}
		v.Planes = append(v.Planes, pv)
	}
	if h.cfg.Accounts != nil {
		v.HasAccounts = true
		v.After = r.URL.Query().Get("after")
		if len(v.After) > 128 {
			v.After = ""
		}
		as, next, err := h.cfg.Accounts.List(ctx, v.After, pageSize)
		if err != nil {
			v.AccountsErr = err.Error()
		}
		v.Accounts, v.Next = as, next
	}
	if h.cfg.Metrics != nil {
		v.Counts, v.Quota, v.Refusals = h.gauges()
	}
	if h.cfg.Errors != nil {
		v.HasErrors = true
		v.Errors, v.ErrorsTotal = h.cfg.Errors.Recent()
	}
	render(w, code, pageTemplate, v)
}

// gauges reads the counts, the quota use and the refusals from the
// metrics.
func (h *Handler) gauges() (counts, quota, refusals []countView) {
	mfs, _ := h.cfg.Metrics.Gather() // a failed collector leaves its figures out
	fam := map[string]*dto.MetricFamily{}
	for _, f := range mfs {
		fam[f.GetName()] = f
	}
	sum := func(name string, match func(map[string]string) bool) (float64, bool) {
		f := fam[name]
		if f == nil {
			return 0, false
		}
		var t float64
		for _, m := range f.GetMetric() {
			if match != nil && !match(labels(m)) {
				continue
			}
			t += value(m)
		}
		return t, true
	}
	add := func(out *[]countView, label, name string, match func(map[string]string) bool, bytes bool) {
		if v, ok := sum(name, match); ok {
			s := fmt.Sprintf("%.0f", v)
			if bytes {
				s = size(v)
			}
			*out = append(*out, countView{label, s})
		}
	}
	scope := func(s string) func(map[string]string) bool {
		return func(l map[string]string) bool { return l["scope"] == s }
	}
	add(&counts, "relay connections (WebSockets)", "skytale_relay_connections", nil, false)
	add(&counts, "relay connections signed in", "skytale_relay_connections_authenticated", nil, false)
	add(&counts, "channels with live subscribers", "skytale_relay_channels_live", nil, false)
	add(&counts, "live subscriptions", "skytale_relay_subscriptions", nil, false)
	add(&counts, "publishes accepted", "skytale_relay_publishes_total", func(l map[string]string) bool { return l["result"] == "ok" }, false)

	add(&quota, "relay archive: payload bytes stored", "skytale_relay_stored_bytes", nil, true)
	add(&quota, "relay archive: server budget", "skytale_relay_budget_bytes", scope("server"), true)
	add(&quota, "relay archive: largest account", "skytale_relay_budget_largest_bytes", scope("account"), true)
	add(&quota, "directory: bytes kept for clients", "skytale_directory_budget_used_bytes", nil, true)
	add(&quota, "directory: server budget", "skytale_directory_budget_limit_bytes", scope("server"), true)
	add(&quota, "directory: largest account", "skytale_directory_budget_largest_bytes", scope("account"), true)

	// A counter by label has no figure until its first count: the
	// directory's are 0 then, when it runs here.
	hasDir := false
	for n := range fam {
		hasDir = hasDir || strings.HasPrefix(n, "skytale_directory_")
	}
	if f := fam["skytale_directory_rate_limited_total"]; f != nil || hasDir {
		by := map[string]float64{}
		for _, m := range f.GetMetric() {
			by["directory "+labels(m)["limit"]+" limit"] += value(m)
		}
		keys := make([]string, 0, len(by))
		for k := range by {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			refusals = append(refusals, countView{k, fmt.Sprintf("%.0f", by[k])})
		}
		if len(keys) == 0 {
			refusals = append(refusals, countView{"directory rate limits", "0"})
		}
	}
	if _, ok := fam["skytale_directory_quota_refusals_total"]; ok || !hasDir {
		add(&refusals, "directory quota refusals", "skytale_directory_quota_refusals_total", nil, false)
	} else {
		refusals = append(refusals, countView{"directory quota refusals", "0"})
	}
	add(&refusals, "relay sockets refused (per address or network)", "skytale_relay_admission_refusals_total", nil, false)
	add(&refusals, "relay sockets refused (per account)", "skytale_relay_connections_refused_total", nil, false)
	add(&refusals, "relay quota refusals", "skytale_relay_quota_refusals_total", nil, false)
	return counts, quota, refusals
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// size is a byte count in binary units.
func size(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// render writes t with v; the page is built whole first, so a template
// failure is a 500 and never half a page.
func render(w http.ResponseWriter, code int, t *template.Template, v any) {
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

type loginView struct {
	Token, Message string
}

const style = `<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}
header{background:#1d2b3a;color:#fff;padding:.8em 1.5em;display:flex;align-items:center;gap:1.5em}
header h1{font-size:1.15em;margin:0;font-weight:600}header a,header button{color:#cfe3ff}header button{background:transparent;border-color:#6d89a8}
main{max-width:72em;margin:0 auto;padding:1em 1.5em}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:.6em 1.2em 1em;margin:1em 0}
h2{font-size:1.05em;margin:.4em 0 .6em}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3em .6em;border-bottom:1px solid #eceef1;vertical-align:top}
th{font-weight:600;color:#4a5563;font-size:.9em}
.ok{color:#0d7a3a;font-weight:600}.bad{color:#b3261e;font-weight:600}
.note{padding:.6em 1em;border-radius:4px;margin:1em 0}.good{background:#e4f5ea}.warn{background:#fdecea}
code,.mono{font-family:ui-monospace,monospace;font-size:.92em;word-break:break-all}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(20em,1fr));gap:0 1em}
form.inline{display:inline}input[type=text],input[type=email],input[type=password]{padding:.35em;border:1px solid #b9c0c8;border-radius:4px}
button{padding:.35em .9em;border:1px solid #8793a0;border-radius:4px;background:#fff;cursor:pointer}
.muted{color:#6b7480}
</style>`

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skytale admin: sign in</title>` + style + `</head>
<body><header><h1>skytale admin</h1></header><main><section>
<h2>Sign in</h2>
{{with .Message}}<p class="note warn">{{.}}</p>{{end}}
<form method="post" action="/admin/login">
<input type="hidden" name="login" value="{{.Token}}">
<p><label>Internal secret (the data folder's <code>internal_secret</code>)<br>
<input type="password" name="secret" id="secret" size="70" autocomplete="off" autofocus></label></p>
<p><button type="submit" id="signin">Sign in</button></p>
</form></section></main></body></html>`))

var refusedTemplate = template.Must(template.New("refused").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skytale admin</title>` + style + `</head>
<body><header><h1>skytale admin</h1></header><main><p class="note warn">{{.}}</p><p><a href="/admin">Back to the page</a></p></main></body></html>`))

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skytale admin</title>` + style + `</head>
<body><header><h1>skytale admin</h1><span class="muted">{{.Version}}</span>
<a href="/metrics">/metrics</a>
{{if .CSRF}}<form class="inline" method="post" action="/admin/logout"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit">Sign out</button></form>{{end}}
</header><main>
{{with .Created}}<div class="note good" id="created"><p>Created account <code>{{.Account.ID}}</code> ({{.Account.Email}}, org {{.Account.Org}}). Its API key, shown this once:</p>
<p><code id="apikey">{{.APIKey}}</code></p><p class="muted">The person signs in with <code>tally signin --api-key KEY</code>. The directory keeps only its hash.</p></div>{{end}}
{{with .Done}}<p class="note good" id="done">{{.}}</p>{{end}}
{{with .Problem}}<p class="note warn" id="problem">{{.}}</p>{{end}}

<div class="grid">
<section id="health"><h2>Health</h2><table>
<tr><th>plane</th><th>health</th><th>readiness</th></tr>
{{range .Planes}}<tr><td>{{.Name}}</td><td class="ok">ok</td><td>{{if .Ready}}<span class="ok">ready</span>{{else}}<span class="bad">not ready</span> <span class="muted">{{.Why}}</span>{{end}}</td></tr>{{end}}
</table>
<p>Up {{.Uptime}}, since {{.Started}}.<br>Version <code>{{.Version}}</code>.</p></section>

{{if .Counts}}<section id="counts"><h2>Connections and channels</h2><table>
{{range .Counts}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>{{end}}</table></section>{{end}}

{{if .Quota}}<section id="quota"><h2>Quota use</h2><table>
{{range .Quota}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>{{end}}</table></section>{{end}}

{{if .Refusals}}<section id="refusals"><h2>Rate-limit and quota refusals</h2><table>
{{range .Refusals}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>{{end}}</table>
<p class="muted">Counted since start. Every figure is in <a href="/metrics">/metrics</a> too.</p></section>{{end}}
</div>

{{if .HasAccounts}}<section id="accounts"><h2>Accounts</h2>
{{with .AccountsErr}}<p class="note warn">The accounts could not be read: {{.}}</p>{{end}}
<table><tr><th>account</th><th>e-mail</th><th>org</th><th>created</th><th>last sign-in</th><th></th></tr>
{{$csrf := .CSRF}}{{range .Accounts}}<tr class="account"><td class="mono">{{.ID}}</td><td>{{.Email}}</td><td>{{.Org}}</td><td>{{.CreatedAt}}</td><td>{{.LastSignin}}</td>
<td>{{if .Disabled}}<span class="bad">disabled</span>{{else}}<form class="inline" method="post" action="/admin/accounts/disable"><input type="hidden" name="csrf" value="{{$csrf}}"><input type="hidden" name="account_id" value="{{.ID}}"><button type="submit" class="disable">Disable</button></form>{{end}}</td></tr>
{{else}}<tr><td colspan="6" class="muted">No accounts{{if $.After}} after this one{{end}}.</td></tr>{{end}}
</table>
{{if .After}}<p><a href="/admin">First page</a></p>{{end}}{{with .Next}}<p><a href="/admin?after={{.}}">Next page</a></p>{{end}}
<h2>Create an account</h2>
<form method="post" action="/admin/accounts"><input type="hidden" name="csrf" value="{{.CSRF}}">
<label>E-mail <input type="email" name="email" id="email" required></label>
<label>Org <input type="text" name="org" id="org" required></label>
<button type="submit" id="create">Create</button></form>
<p class="muted">Any signup mode: the org is created if it does not exist. Disabling revokes the account on both planes at once; its data stays (<code>tally serve accounts remove</code> deletes it).</p>
</section>{{end}}

{{if .HasErrors}}<section id="errors"><h2>Recent errors</h2>
<p class="muted">The last {{len .Errors}} of {{.ErrorsTotal}} error log records since start, newest first.</p>
<table>{{range .Errors}}<tr><td class="mono">{{when .Time}}</td><td>{{.Message}}</td><td class="mono">{{.Attrs}}</td></tr>
{{else}}<tr><td class="muted">None.</td></tr>{{end}}</table></section>{{end}}
</main></body></html>`))
