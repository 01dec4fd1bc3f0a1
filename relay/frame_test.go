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
		// A key is one of a frame's only when spelled out whole.
		{`{"types":"a","typ":"b","":"c","channel":"a/b/c"}`, frame{Channel: []byte("a/b/c")}, true},
		{`{"payload":"QQ==","type":"publish","token":"t","batch":false}`, frame{Type: []byte("publish"), Token: []byte("t"), Payload: []byte("QQ==")}, true},
		{`{"type"`, frame{}, false},
		{`{"type":`, frame{}, false},
		{`{"type":"publish","payload"`, frame{}, false},
		{`{"type":"a","channel":"`, frame{}, false},
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
		bytes.Equal(a.Channel, b.Channel) && bytes.Equal(a.Payload, b.Payload) && bytes.Equal(a.ID, b.ID) && a.Batch == b.Batch
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
					for _, f := range []string{"type", "token", "channel", "payload", "id", "batch"} {
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
		`{"type":"publish","channel":"a/b/c","payload":"AAEC","id":"k-1"}`, `{"id":"a","id":"a"}`, `{"ID":"a"}`, `{"id":7}`,
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
			ID      *string `json:"id"`
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
			ID: str(ref.ID), Batch: ref.Batch != nil && *ref.Batch}
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

// refStr is flatScanner.str as a plain loop over the bytes, the statement
// of what str accepts, returns and where it leaves the scanner.
func refStr(b []byte, i int) (val []byte, ok bool, end int) {
	if i >= len(b) || b[i] != '"' {
		return nil, false, i
	}
	i++
	start := i
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			return b[start:i], true, i + 1
		}
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return nil, false, i
		}
	}
	return nil, false, i
}

// checkStr fails t unless str, from b[i], does what refStr does: the same
// verdict, the same slice of b (not only the same bytes) and the same
// final index.
func checkStr(t *testing.T, b []byte, i int) {
	t.Helper()
	want, wantOK, wantEnd := refStr(b, i)
	s := flatScanner{b: b, i: i}
	got, ok := s.str()
	if ok != wantOK || s.i != wantEnd || len(got) != len(want) || cap(got) != cap(want) ||
		(got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Fatalf("str of %q from %d: %q %v at %d (cap %d), want %q %v at %d (cap %d)",
			b, i, got, ok, s.i, cap(got), want, wantOK, wantEnd, cap(want))
	}
}

// TestFlatScannerStr puts each byte that ends or spoils a plain string,
// and its neighbours, at every position of strings from empty to five
// words long, at every alignment, with and without a closing quote, with
// and without bytes after it: str must agree with refStr on each.
func TestFlatScannerStr(t *testing.T) {
	probes := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', 0x23, 0x5b, '\\', 0x5d, 0x7f, 0x80, 0xc3, 0xff}
	for _, lead := range []int{0, 1, 3, 7, 8} {
		for n := 0; n <= 40; n++ {
			for _, tail := range []string{"", `"`, `"}`, `","payload":"QUJD"}`} {
				b := []byte(strings.Repeat(" ", lead) + `"` + strings.Repeat("a", n) + tail)
				checkStr(t, b, lead)
				checkStr(t, b, 0) // not at a quote
				for pos := lead + 1; pos < lead+1+n; pos++ {
					for _, c := range probes {
						old := b[pos]
						b[pos] = c
						checkStr(t, b, lead)
						b[pos] = old
					}
				}
			}
		}
	}
	// Bytes sought side by side, where a subtraction's borrow from the
	// first could hide or fake the second.
	for _, pair := range []string{"\x1f\x20", "\x00\x01", "\\]", "\\\"", "\"\\", "\x80\"", "\x21\"", "\x00\"", "\x1f\""} {
		for pos := 0; pos < 16; pos++ {
			b := []byte(`"` + strings.Repeat("A", pos) + pair + strings.Repeat("B", 20) + `"`)
			checkStr(t, b, 0)
		}
	}
}

// FuzzFlatScannerStr checks str against refStr on arbitrary bytes from an
// arbitrary start.
func FuzzFlatScannerStr(f *testing.F) {
	f.Add([]byte(`"type":"publish"`), uint16(0))
	f.Add([]byte(`{"payload":"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="}`), uint16(11))
	f.Add([]byte(`"QUJDREVGR0hJSktMTU5PUFFSU1RV\\VldYWVo="`), uint16(0))
	f.Add([]byte("\"QUJDREVGR0hJSktMTU5PUFFSU1RV\x01VldYWVo=\""), uint16(0))
	f.Add([]byte("\"QUJDREVGR0hJSktMTU5PUFFSU1RV\u00e9VldYWVo=\""), uint16(0))
	f.Add([]byte(`"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=`), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, start uint16) {
		checkStr(t, b, int(start)%(len(b)+1))
	})
}

// TestDecodeFrameLongPayload puts an escape, a control byte or a non-ASCII
// byte at every position of a long payload: the fast path must refuse it,
// and decodeFrame must then say what encoding/json says.
func TestDecodeFrameLongPayload(t *testing.T) {
	payload := strings.Repeat("QUJD", 50)
	for _, bad := range []string{`\/`, `\u0041`, "\x01", "\x1f", "\x7f", "\u00e9", "\xff", `"`} {
		for pos := 0; pos <= len(payload); pos++ {
			in := []byte(`{"type":"publish","channel":"org/x/y","payload":"` + payload[:pos] + bad + payload[pos:] + `"}`)
			flat, flatOK := decodeFlat(in)
			var ref struct{ Payload *string }
			refErr := json.Unmarshal(in, &ref)
			got, err := decodeFrame(in)
			switch {
			case bad == "\x7f":
				if !flatOK || string(flat.Payload) != payload[:pos]+bad+payload[pos:] {
					t.Fatalf("%q at %d: the fast path refused DEL", bad, pos)
				}
			case flatOK:
				t.Fatalf("%q at %d: the fast path took it: %q", bad, pos, flat.Payload)
			}
			if (err == nil) != (refErr == nil) {
				t.Fatalf("%q at %d: decodeFrame err %v, encoding/json err %v", bad, pos, err, refErr)
			}
			if err == nil && string(got.Payload) != *ref.Payload {
				t.Fatalf("%q at %d: payload %q, encoding/json %q", bad, pos, got.Payload, *ref.Payload)
			}
		}
	}
}
