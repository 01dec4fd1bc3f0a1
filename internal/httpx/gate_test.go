package httpx

import (
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g Gate
	if !g.Enter() {
		t.Fatal("open gate refused")
	}
	if !g.Close() || g.Close() {
		t.Fatal("Close must report true once")
	}
	if g.Enter() || !g.Closed() {
		t.Fatal("closed gate admitted")
	}
	done := g.Drained()
	select {
	case <-done:
		t.Fatal("drained with a request in flight")
	case <-time.After(10 * time.Millisecond):
	}
	g.Leave()
	<-done
}
