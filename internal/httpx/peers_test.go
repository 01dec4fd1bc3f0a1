package httpx

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestPeersTry: a request goes to the peer that answered last, on to the
// next when it fails or hangs past its share, and none is asked once the
// context is done.
func TestPeersTry(t *testing.T) {
	p := NewPeers(" http://a/ ,, http://b,http://c ")
	down := map[string]bool{"http://a": true}
	var asked []string
	ask := func(ctx context.Context, base string) error {
		asked = append(asked, base)
		if base == "http://b" && down["hang-b"] {
			<-ctx.Done()
			return ctx.Err()
		}
		if down[base] {
			return errors.New("down")
		}
		return nil
	}
	if err := p.Try(context.Background(), time.Second, ask); err != nil || !slices.Equal(asked, []string{"http://a", "http://b"}) {
		t.Fatalf("first try: %v, asked %v", err, asked)
	}
	asked = nil
	if err := p.Try(context.Background(), time.Second, ask); err != nil || !slices.Equal(asked, []string{"http://b"}) {
		t.Fatalf("the peer that answered last is asked first: %v, asked %v", err, asked)
	}
	asked, down["hang-b"] = nil, true
	if err := p.Try(context.Background(), 50*time.Millisecond, ask); err != nil || !slices.Equal(asked, []string{"http://b", "http://c"}) {
		t.Fatalf("a hanging peer gets its share only: %v, asked %v", err, asked)
	}
	asked, down["http://c"] = nil, true
	if err := p.Try(context.Background(), 50*time.Millisecond, ask); err == nil || len(asked) != 3 {
		t.Fatalf("all down: %v, asked %v", err, asked)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	asked = nil
	if err := p.Try(ctx, time.Second, ask); err == nil || len(asked) != 1 {
		t.Fatalf("a done context: %v, asked %v", err, asked)
	}
	if one := NewPeers(""); one.Try(context.Background(), time.Second, func(_ context.Context, base string) error {
		if base != "" {
			t.Fatalf("an empty list asks %q", base)
		}
		return nil
	}) != nil {
		t.Fatal("an empty list")
	}
}
