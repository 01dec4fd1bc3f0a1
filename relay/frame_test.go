package relay

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestDecodeFrame(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want frame
		ok   bool
	}{
		{`{"type":"auth","token":"a.b.c"}`, frame{Type: []byte("auth"), Token: []byte("a.b.c")}, true},
		{` { "type" : "publish" , "channel":"a/b/c", "payload":"QQ==" } `, frame{Type: []byte("publish"), Channel: []byte("a/b/c"), Payload: []byte("QQ==")}, true},
		{`{"type":"subscribe","channel":"a\/b\/c"}`, frame{Type: []byte("subscribe"), Channel: []byte("a/b/c")}, true},
		{`{"TYPE":"auth"}`, frame{Type: []byte("auth")}, true}, // encoding/json matches keys case-insensitively
		{`{"type":"auth","extra":{"x":[1,2]}}`, frame{Type: []byte("auth")}, true},
		{`{"type":"a","type":"b"}`, frame{Type: []byte("b")}, true},
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
		bytes.Equal(a.Channel, b.Channel) && bytes.Equal(a.Payload, b.Payload)
}

// FuzzDecodeFrame checks that the in-place fast path agrees with
// encoding/json on every input, and that accepted frames re-encode and
// decode to the same fields.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"auth","token":"eyJ.x.y"}`,
		`{"type":"publish","channel":"a/b/c","payload":"AAEC"}`,
		`{"type":"subscribe","channel":"a/b/c"}`,
		`{"type":"unsubscribe","channel":"a/b/c","x":null}`,
		`{"type":"p\u00e9","channel":"\ud800"}`,
		` {"type" :"a"}`, `{"type":"a",}`, `null`, `"x"`, `{"type":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeFrame(b)
		var ref struct {
			Type    *string `json:"type"`
			Token   *string `json:"token"`
			Channel *string `json:"channel"`
			Payload *string `json:"payload"`
		}
		refErr := json.Unmarshal(b, &ref)
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
		want := frame{Type: str(ref.Type), Token: str(ref.Token), Channel: str(ref.Channel), Payload: str(ref.Payload)}
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
