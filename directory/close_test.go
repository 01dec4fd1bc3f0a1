package directory

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCloseStopsAccepting: after Close, requests get 503 in the JSON error
// shape instead of reaching a closed database.
func TestCloseStopsAccepting(t *testing.T) {
	s, err := New(context.Background(), Config{JWTSecret: []byte("0123456789abcdef0123456789abcdef"), OpenSignup: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/health", "/v1/accounts"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s after Close: %d %s", path, w.Code, w.Body)
		}
	}
}
