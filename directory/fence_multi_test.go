package directory

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestHTTPFenceSeveralRelays: a fence source given several relays reads
// from one that answers when the first does not, keeps to it while it
// answers, and fails only when none does.
func TestHTTPFenceSeveralRelays(t *testing.T) {
	var downHits, upHits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downHits.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upHits.Add(1)
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"channel":%q,"epoch":7,"known":true}`, r.URL.Query().Get("channel"))
	}))
	defer up.Close()
	f := NewHTTPFence(down.URL+", "+up.URL+"/", "s3cret", nil)
	for i := range 3 {
		epoch, known, err := f.NextEpoch(context.Background(), "acme/ops/x")
		if err != nil || epoch != 7 || !known {
			t.Fatalf("read %d: %d %v %v", i, epoch, known, err)
		}
	}
	if downHits.Load() != 1 || upHits.Load() != 3 {
		t.Fatalf("the failed relay was asked %d times, the answering one %d: it should keep to the one that answers", downHits.Load(), upHits.Load())
	}
	up.Close()
	if _, _, err := f.NextEpoch(context.Background(), "acme/ops/x"); err == nil {
		t.Fatal("no relay answers, yet the fence was read")
	}
}
