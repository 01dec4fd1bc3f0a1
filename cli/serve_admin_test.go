package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAdminOnlyOnTheMetricsListener: the admin page answers on the
// metrics listener, behind the internal secret, and the public listeners
// of both planes know no /admin at all (404, with the secret too).
func TestServeAdminOnlyOnTheMetricsListener(t *testing.T) {
	data := t.TempDir()
	p := serveInProcess(t, serveOptions{Data: data, MetricsAddr: "127.0.0.1:0"})
	b, err := os.ReadFile(filepath.Join(data, "internal_secret"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(b))
	get := func(url, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, base := range []string{p.apiURL, p.relURL} {
		for _, path := range []string{"/admin", "/admin/", "/admin/login"} {
			if code, _ := get(base+path, secret); code != http.StatusNotFound {
				t.Errorf("%s%s on a public listener: %d, want 404", base, path, code)
			}
		}
	}
	if code, _ := get(p.metricsURL+"/admin", ""); code != http.StatusUnauthorized {
		t.Errorf("/admin on the metrics listener without the secret: %d, want 401", code)
	}
	code, body := get(p.metricsURL+"/admin", secret)
	if code != http.StatusOK {
		t.Fatalf("/admin with the secret: %d\n%s", code, body)
	}
	for _, want := range []string{`<td>directory</td>`, `<td>relay</td>`, `id="accounts"`, `href="/metrics"`, "relay connections"} {
		if !strings.Contains(body, want) {
			t.Errorf("the admin page lacks %q", want)
		}
	}
}
