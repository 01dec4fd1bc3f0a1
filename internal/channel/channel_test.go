package channel

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	good := []string{"acme/payments/agent-v1", "a/b/c", "A_1/b.c/d-e", strings.Repeat("a", 252) + "/b/c"} // the last is exactly 256 bytes
	for _, n := range good {
		if err := Valid(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	bad := []string{"", "a/b", "a/b/c/d", "a//c", "/b/c", "a/b/", "a/./c", "../b/c", "a/b/..",
		"a/b/c d", "a/b/c\x00", "a/b/ç", "a/b/c?x", strings.Repeat("a", 253) + "/b/c"}
	for _, n := range bad {
		if err := Valid(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: accepted", n)
		}
	}
}

func TestSplitAndGroupID(t *testing.T) {
	o, n, s := Split("acme/payments/agent-v1")
	if o != "acme" || n != "payments" || s != "agent-v1" {
		t.Fatal(o, n, s)
	}
	id := GroupID("a/b/c")
	if got := hex.EncodeToString(id[:]); got != "d76a7b72669c9cec266b566bdec68efbc8d4f22d1f2689bbf0146bf0b88fdbe9" {
		t.Fatalf("GroupID = %s", got)
	}
}
