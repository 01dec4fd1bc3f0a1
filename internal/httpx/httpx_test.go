package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type req struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func TestDecodeJSON(t *testing.T) {
	cases := []struct {
		body   string
		status int
		code   string
	}{
		{`{"name":"a","n":1}`, 0, ""},
		{`{"name":"a"}  `, 0, ""},
		{``, 400, "invalid_json"},
		{`{"name":`, 400, "invalid_json"},
		{`{"name":1}`, 400, "invalid_json"},
		{`[]`, 400, "invalid_json"},
		{`{"name":"a","extra":1}`, 400, "invalid_json"},
		{`{"name":"a"}{"name":"b"}`, 400, "invalid_json"},
		{`{"name":"` + strings.Repeat("x", 200) + `"}`, 413, "body_too_large"},
		// Two readings of one body are refused: a repeated key, and a
		// key encoding/json would match only case-insensitively.
		{`{"name":"a","name":"b"}`, 400, "invalid_json"},
		{`{"name":"a","n":1,"n":2}`, 400, "invalid_json"},
		{`{"Name":"a"}`, 400, "invalid_json"},
		{`{"name":"a","N":1}`, 400, "invalid_json"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
		var v req
		err := DecodeJSON(w, r, 128, &v)
		if c.status == 0 {
			if err != nil {
				t.Errorf("%q: %v", c.body, err)
			}
			continue
		}
		be, ok := err.(*BodyError)
		if !ok || be.Status != c.status || be.Code != c.code {
			t.Errorf("%q: err = %#v, want %d %s", c.body, err, c.status, c.code)
		}
		if strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%q: error quotes the body", c.body)
		}
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer ": "", "": ""} {
		r, _ := http.NewRequest("GET", "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		got, ok := Bearer(r)
		if got != want || ok != (want != "") {
			t.Errorf("%q: got %q %v", h, got, ok)
		}
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, 404, "not_found", "no such request")
	if w.Code != 404 || strings.TrimSpace(w.Body.String()) != `{"error":"not_found","message":"no such request"}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.Header().Get("Content-Type") != "application/json" {
		t.Fatal("content type")
	}
}

func TestLogPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/channels/pending":                 "/v1/channels/pending",
		"/ws/acme/pay/agent":                   "/ws/acme/pay/agent",
		"/v1/channels/welcome/sk_live_abc":     "/v1/channels/welcome/[redacted]",
		"/v1/x/skt_inv_abc/ack":                "/v1/x/[redacted]/ack",
		"/v1/messages/eyJhbGciOi.eyJzdWIi.sig": "/v1/messages/[redacted]",
		"/ws/eyJhbGciOi/x/y":                   "/ws/[redacted]/x/y",
	} {
		if got := LogPath(in); got != want {
			t.Errorf("LogPath(%q) = %q, want %q", in, got, want)
		}
	}
}
