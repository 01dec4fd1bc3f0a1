package seat

import (
	"encoding/json"
	"testing"
)

// FuzzHandoffRequest: any request line decodes or is refused without
// panicking; one that decodes is of a known kind, names a room unless it
// is a push, holds at most MaxTextLen, and encodes back to a line that
// decodes the same.
func FuzzHandoffRequest(f *testing.F) {
	f.Add([]byte(`{"kind":"send","room":"ops","text":"hello"}` + "\n"))
	f.Add([]byte(`{"room":"ops","text":"hello"}`))
	f.Add([]byte(`{"kind":"send","room":"","text":"x"}`))
	f.Add([]byte(`{"kind":"send","room":"ops","text":"a","more":1}`))
	f.Add([]byte(`{"kind":"push"} {"kind":"push"}`))
	f.Add([]byte(`{"kind":"push","room":"ops"}`))
	f.Add([]byte(`{"kind":"add","room":"ops","member":"did:key:z6Mk","token":"skt_add_x"}`))
	f.Add([]byte(`{"kind":"remove","room":"ops"}`))
	f.Add([]byte(`{"kind":"auto_invite","room":"ops","uses":3,"ttl":60000000000}`))
	f.Add([]byte(`{"kind":"auto_invite","room":"ops","uses":-1}`))
	f.Add([]byte(`{"kind":"rename","room":"ops"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeHandoffRequest(b)
		if err != nil {
			return
		}
		switch {
		case r.Kind == handPush && (r.Room != "" || r.Text != "" || r.Member != "" || r.Token != ""),
			r.Kind != handPush && r.Room == "",
			len(r.Text) > MaxTextLen:
			t.Fatalf("accepted %+v", r)
		}
		again, _ := json.Marshal(r)
		if r2, err := decodeHandoffRequest(again); err != nil || r2 != r {
			t.Fatalf("%+v encodes to %s, which decodes to %+v, %v", r, again, r2, err)
		}
	})
}
