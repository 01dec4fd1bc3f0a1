package seat

import (
	"encoding/json"
	"testing"
)

// FuzzHandoffRequest: any request line decodes or is refused without
// panicking; one that decodes names a room, holds at most MaxTextLen, and
// encodes back to a line that decodes the same.
func FuzzHandoffRequest(f *testing.F) {
	f.Add([]byte(`{"room":"ops","text":"hello"}` + "\n"))
	f.Add([]byte(`{"room":"","text":"x"}`))
	f.Add([]byte(`{"room":"ops","text":"a","more":1}`))
	f.Add([]byte(`{"room":"ops"} {"room":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeHandoffRequest(b)
		if err != nil {
			return
		}
		if r.Room == "" || len(r.Text) > MaxTextLen {
			t.Fatalf("accepted %+v", r)
		}
		again, _ := json.Marshal(r)
		if r2, err := decodeHandoffRequest(again); err != nil || r2 != r {
			t.Fatalf("%+v encodes to %s, which decodes to %+v, %v", r, again, r2, err)
		}
	})
}
