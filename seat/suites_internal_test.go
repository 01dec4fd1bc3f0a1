package seat

import (
	"bytes"
	"testing"
)

func TestJoinOfferEncoding(t *testing.T) {
	kps := [][]byte{[]byte("first"), bytes.Repeat([]byte{7}, 300)}
	b := encodeOffer(kps)
	got, err := decodeOffer(b)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], kps[0]) || !bytes.Equal(got[1], kps[1]) {
		t.Fatalf("round trip: %q %v", got, err)
	}
	if got, err := decodeOffer([]byte("bare")); err != nil || len(got) != 1 || string(got[0]) != "bare" {
		t.Fatalf("a bare KeyPackage: %q %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty offer":      []byte(joinOfferMagic),
		"short length":     append([]byte(joinOfferMagic), 0, 0),
		"length past end":  append([]byte(joinOfferMagic), 0, 0, 0, 9, 1),
		"zero length":      append([]byte(joinOfferMagic), 0, 0, 0, 0),
		"too many":         encodeOffer([][]byte{{1}, {2}, {3}, {4}, {5}}),
		"trailing garbage": append(encodeOffer(kps), 1),
	} {
		if _, err := decodeOffer(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzJoinOffer: the offer decoder never panics, and what it accepts in
// the framed form re-encodes to the same bytes.
func FuzzJoinOffer(f *testing.F) {
	f.Add(encodeOffer([][]byte{[]byte("a"), []byte("bc")}))
	f.Add([]byte(joinOfferMagic))
	f.Add([]byte("bare"))
	f.Fuzz(func(t *testing.T, b []byte) {
		kps, err := decodeOffer(b)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(b, []byte(joinOfferMagic)) {
			if len(kps) != 1 || !bytes.Equal(kps[0], b) {
				t.Fatalf("a bare offer decodes to %q", kps)
			}
			return
		}
		if again := encodeOffer(kps); !bytes.Equal(again, b) {
			t.Fatalf("%x re-encodes to %x", b, again)
		}
	})
}
