package directory

import (
	"net/url"
	"testing"
	"time"
)

// TestAddTokensPaged: GET /v1/contacts/tokens answers at most 50 tokens
// a page, newest first, with has_more and a cursor, and the pages hold
// each of the account's tokens once; a bad cursor is 400.
func TestAddTokensPaged(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.account("acme")
	made := map[string]bool{}
	for range MaxAddTokens {
		r := e.do("POST", "/v1/contacts/tokens", key, nil)
		want(t, r, 201, "")
		made[r.str("id")] = true
		e.clock.Advance(time.Millisecond)
	}
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		path := "/v1/contacts/tokens"
		if after != "" {
			path += "?after=" + url.QueryEscape(after)
		}
		r := e.do("GET", path, key, nil)
		want(t, r, 200, "")
		pages++
		toks := r.body["tokens"].([]any)
		if len(toks) > maxAddTokensListed {
			t.Fatalf("a page of %d tokens", len(toks))
		}
		for _, tk := range toks {
			id := tk.(map[string]any)["id"].(string)
			if seen[id] || !made[id] {
				t.Fatalf("token %s listed twice or not the account's", id)
			}
			seen[id] = true
		}
		if r.body["has_more"] != true {
			break
		}
		after = r.str("next")
	}
	if pages != 3 && pages != 2 || len(seen) != len(made) {
		t.Fatalf("%d pages held %d of %d tokens", pages, len(seen), len(made))
	}
	want(t, e.do("GET", "/v1/contacts/tokens?after=nonsense", key, nil), 400, "invalid_request")
}

// FuzzAddTokenCursor: a cursor that parses prints back as itself, and
// none makes the parser panic or take a token id that could not be
// stored.
func FuzzAddTokenCursor(f *testing.F) {
	for _, s := range []string{"", "1.abc", "0.x", "-1.a", "1.", ".a", "9223372036854775807.z", "1.a.b", "1.\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseAddTokenCursor(s)
		if !ok {
			return
		}
		if !storable(c.id) || c.at < 0 {
			t.Fatalf("%q parsed to %+v", s, c)
		}
		if again, ok := parseAddTokenCursor(c.String()); !ok || again != c {
			t.Fatalf("%q: %+v prints as %q, which parses to %+v, %v", s, c, c.String(), again, ok)
		}
	})
}
