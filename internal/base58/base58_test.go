package base58

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// Vectors from Bitcoin Core's base58_encode_decode.json.
var vectors = []struct{ hex, enc string }{
	{"", ""},
	{"61", "2g"},
	{"626262", "a3gV"},
	{"636363", "aPEr"},
	{"73696d706c792061206c6f6e6720737472696e67", "2cFupjhnEsSn59qHXstmK2ffpLv2"},
	{"00eb15231dfceb60925886b67d065299925915aeb172c06647", "1NS17iag9jJgTHD1VXjvLCEnZuQ3rJDE9L"},
	{"516b6fcd0f", "ABnLTmg"},
	{"bf4f89001e670274dd", "3SEo3LWLoPntC"},
	{"572e4794", "3EFU7m"},
	{"ecac89cad93923c02321", "EJDM8drfXA6uyA"},
	{"10c8511e", "Rt5zm"},
	{"00000000000000000000", "1111111111"},
	// An Ed25519 public key from the did:key method's examples.
	{"94966b7c08e405775f8de6cc1c4508f6eb227403e1025b2c8ad2d7477398c5b2", "B12NYF8RrR3h41TDCTJojY59usg3mbtbjnFs7Eud1Y6u"},
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		b, _ := hex.DecodeString(v.hex)
		if got := Encode(b); got != v.enc {
			t.Errorf("Encode(%s) = %q, want %q", v.hex, got, v.enc)
		}
		got, err := Decode(v.enc)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("Decode(%q) = %x, %v; want %s", v.enc, got, err, v.hex)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, s := range []string{"0", "O", "I", "l", "2g!", "a b", "\xff", strings.Repeat("2", MaxDecodeLen+1)} {
		if _, err := Decode(s); err == nil {
			t.Errorf("Decode(%q) succeeded", s)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, v := range vectors {
		b, _ := hex.DecodeString(v.hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 700 {
			return // past MaxDecodeLen once encoded
		}
		got, err := Decode(Encode(b))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("round trip of %x: %x, %v", b, got, err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, v := range vectors {
		f.Add(v.enc)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := Decode(s)
		if err != nil {
			return
		}
		// Base58 has exactly one encoding per byte string.
		if Encode(b) != s {
			t.Fatalf("Decode(%q) = %x, which encodes as %q", s, b, Encode(b))
		}
	})
}
