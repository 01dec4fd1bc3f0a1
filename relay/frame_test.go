package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeFrame(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want frame
		ok   bool
	}{
		{`{"type":"auth","token":"a.b.c"}`, frame{Type: []byte("auth"), Token: []byte("a.b.c")}, true},
		{`{"type":"auth","token":"a.b.c","batch":true}`, frame{Type: []byte("auth"), Token: []byte("a.b.c"), Batch: true}, true},
		{`{"type":"auth","batch" : false ,"token":"a.b.c"}`, frame{Type: []byte("auth"), Token: []byte("a.b.c")}, true},
		{`{"batch":true}`, frame{Batch: true}, true},
		{`{"type":"auth","batch":null}`, frame{Type: []byte("auth")}, true},
		// batch is a JSON boolean, once, spelled exactly.
		{`{"type":"auth","batch":"true"}`, frame{}, false},
		{`{"type":"auth","batch":1}`, frame{}, false},
		{`{"type":"auth","batch":truex}`, frame{}, false},
		{`{"type":"auth","batch":tru}`, frame{}, false},
		{`{"type":"auth","batch":true,"batch":false}`, frame{}, false},
		{`{"type":"auth","Batch":true}`, frame{}, false},
		{` { "type" : "publish" , "channel":"a/b/c", "payload":"QQ==" } `, frame{Type: []byte("publish"), Channel: []byte("a/b/c"), Payload: []byte("QQ==")}, true},
		{`{"type":"subscribe","channel":"a\/b\/c"}`, frame{Type: []byte("subscribe"), Channel: []byte("a/b/c")}, true},
		{`{"type":"auth","extra":{"x":[1,2]}}`, frame{Type: []byte("auth")}, true},
		{`{"typ\u0065":"auth"}`, frame{Type: []byte("auth")}, true},
		// Keys are exact and unique: encoding/json alone would match
		// "TYPE" to type and keep the last of two "type" keys.
		{`{"TYPE":"auth"}`, frame{}, false},
		{`{"type":"publish","Channel":"a/b/c"}`, frame{}, false},
		{`{"type":"a","type":"b"}`, frame{}, false},
		{`{"type":"a","token":"t","type":"a"}`, frame{}, false},
		{`{"type":"a","Type":"b"}`, frame{}, false},
		{`{"type":"a","typ\u0065":"b"}`, frame{}, false},
		{`{"type":"a","x":{"k":1,"k":2}}`, frame{}, false},
		{`{}`, frame{}, true},
		{`{"type":7}`, frame{}, false},
		{`{"type":"a",}`, frame{}, false},
		{`{"type":"a"} x`, frame{}, false},
		{`[]`, frame{}, false},
		{`not json`, frame{}, false},
		{``, frame{}, false},
	} {
		got, err := decodeFrame([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.in, err)
			continue
		}
		if tc.ok && !frameEqual(got, tc.want) {
			t.Errorf("%s: got %+v", tc.in, got)
		}
	}
}

func frameEqual(a, b frame) bool {
	return bytes.Equal(a.Type, b.Type) && bytes.Equal(a.Token, b.Token) &&
		bytes.Equal(a.Channel, b.Channel) && bytes.Equal(a.Payload, b.Payload) && a.Batch == b.Batch
}

// strictKeys is the fuzz target's own statement of the key rules: no
// object anywhere repeats a key, and no top-level key differs from a frame
// field only in case.
func strictKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func(top bool) bool
	walk = func(top bool) bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				key := k.(string)
				if seen[key] {
					return false
				}
				seen[key] = true
				if top {
					for _, f := range []string{"type", "token", "channel", "payload", "batch"} {
						if key != f && strings.EqualFold(key, f) {
							return false
						}
					}
				}
				if !walk(false) {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		case json.Delim('['):
			for dec.More() {
				if !walk(false) {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		}
		return true
	}
	return walk(true)
}

// FuzzDecodeFrame checks that the in-place fast path agrees with
// encoding/json plus the key rules on every input, that accepted frames
// re-encode and decode to the same fields, and that payloadStart finds
// the payload of every frame the fast path takes.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"auth","token":"eyJ.x.y"}`,
		`{"type":"publish","channel":"a/b/c","payload":"AAEC"}`,
		`{"type":"subscribe","channel":"a/b/c"}`,
		`{"type":"unsubscribe","channel":"a/b/c","x":null}`,
		`{"type":"p\u00e9","channel":"\ud800"}`,
		` {"type" :"a"}`, `{"type":"a",}`, `null`, `"x"`, `{"type":null}`,
		`{"type":"a","type":"a"}`, `{"TYPE":"auth"}`, `{"type":"a","x":{"k":1,"k":2}}`,
		`{"type":"auth","token":"t","batch":true}`, `{"batch":false}`, `{"batch":true }`, `{"batch":null}`,
		`{"batch":"true"}`, `{"batch":truefalse}`, `{"batch":true,"batch":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// payloadStart, which large frames are peeked with, finds the
		// payload where the fast path does.
		if flat, ok := decodeFlat(b); ok && flat.Payload != nil {
			if i, ok := payloadStart(b); !ok || i != cap(b)-cap(flat.Payload) {
				t.Fatalf("payloadStart %d %v, the payload starts at %d", i, ok, cap(b)-cap(flat.Payload))
			}
		}
		got, err := decodeFrame(b)
		var ref struct {
			Type    *string `json:"type"`
			Token   *string `json:"token"`
			Channel *string `json:"channel"`
			Payload *string `json:"payload"`
			Batch   *bool   `json:"batch"`
		}
		refErr := json.Unmarshal(b, &ref)
		if refErr == nil && !strictKeys(b) {
			refErr = errors.New("duplicate or case-mismatched key")
		}
		if (err == nil) != (refErr == nil) {
			t.Fatalf("decodeFrame err %v, encoding/json err %v", err, refErr)
		}
		if err != nil {
			return
		}
		str := func(p *string) []byte {
			if p == nil {
				return nil
			}
			return []byte(*p)
		}
		want := frame{Type: str(ref.Type), Token: str(ref.Token), Channel: str(ref.Channel), Payload: str(ref.Payload),
			Batch: ref.Batch != nil && *ref.Batch}
		if !frameEqual(got, want) {
			t.Fatalf("decodeFrame %+v, encoding/json %+v", got, want)
		}
		if (got.Type == nil) != (ref.Type == nil) || (got.Payload == nil) != (ref.Payload == nil) {
			t.Fatalf("presence differs: %+v vs %+v", got, ref)
		}
		again, err := json.Marshal(map[string]string{"type": string(got.Type), "token": string(got.Token),
			"channel": string(got.Channel), "payload": string(got.Payload)})
		if err != nil {
			t.Fatal(err)
		}
		round, err := decodeFrame(again)
		if err != nil || !bytes.Equal(round.Type, want.Type) || !bytes.Equal(round.Payload, want.Payload) {
			t.Fatalf("round trip of %q: %+v, %v", again, round, err)
		}
	})
}
