package httpx

import (
	"encoding/json"
	"strings"
	"testing"
)

type inner struct {
	Channel string `json:"channel"`
}

type outer struct {
	Type  string            `json:"type"`
	In    inner             `json:"in"`
	List  []inner           `json:"list"`
	Extra map[string]string `json:"extra"`
	Any   any               `json:"any"`
	inner
}

func TestCheckKeys(t *testing.T) {
	cases := []struct {
		body string
		bad  string // a fragment of the error, "" for none
	}{
		{`{"type":"a","in":{"channel":"x"},"list":[{"channel":"y"}],"extra":{"k":"v"}}`, ""},
		{`{"channel":"embedded"}`, ""},
		{`{"unknown":1}`, ""}, // the decoder's DisallowUnknownFields reports it
		{`{"type":"a","type":"b"}`, `duplicate key "type"`},
		{`{"Type":"a"}`, `"Type" must be spelled "type"`},
		{`{"in":{"CHANNEL":"x"}}`, `"CHANNEL" must be spelled "channel"`},
		{`{"list":[{"channel":"x"},{"channel":"x","channel":"y"}]}`, `duplicate key "channel"`},
		{`{"extra":{"k":"1","k":"2"}}`, `duplicate key "k"`},
		{`{"extra":{"K":"1","k":"2"}}`, ""}, // map keys are data, not field names
		{`{"any":{"a":{"b":1,"b":2}}}`, `duplicate key "b"`},
		{`{"Channel":"embedded"}`, `must be spelled "channel"`},
		{`{"type":`, ""}, // malformed: left to the decoder
	}
	for _, c := range cases {
		var v outer
		err := CheckKeys([]byte(c.body), &v)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s: unexpected %v", c.body, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s: err = %v, want %q", c.body, err, c.bad)
		}
	}
}

func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{`{"type":"a"}`, `{"in":{"channel":"x"},"list":[{}]}`, `{"a":1,"a":2}`, `[{"Type":1}]`, `{"any":{"a":[{"b":1}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v outer
		if CheckKeys(b, &v) != nil || !json.Valid(b) {
			return
		}
		// A body CheckKeys passes has no repeated key anywhere: decoding
		// it into maps keeps every key the text holds.
		var generic any
		if json.Unmarshal(b, &generic) != nil {
			return
		}
		if got, want := mapKeys(generic), textKeys(b); got != want {
			t.Fatalf("CheckKeys passed %d keys in the text but %d survive decoding", want, got)
		}
	})
}

func mapKeys(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += 1 + mapKeys(e)
		}
	case []any:
		for _, e := range v {
			n += mapKeys(e)
		}
	}
	return n
}

// textKeys counts the object keys in valid JSON text, repeats included.
func textKeys(b []byte) int {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	n := 0
	type level struct{ object, wantKey bool }
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].wantKey {
			if _, isKey := tok.(string); isKey {
				n++
				stack[top].wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
			if top > 0 && stack[top-1].object {
				stack[top-1].wantKey = true
			}
		default:
			if top >= 0 && stack[top].object {
				stack[top].wantKey = true
			}
		}
	}
}
