package relay

import (
	"crypto/rand"
	"encoding/base64"
	"testing"
)

// benchPublishFrame is a publish frame as a client sends it: a 1 KiB
// payload (benchPayload) as standard base64, 1,368 characters.
func benchPublishFrame() []byte {
	payload := make([]byte, benchPayload)
	rand.Read(payload)
	return []byte(`{"type":"publish","channel":"org/x/y","payload":"` + base64.StdEncoding.EncodeToString(payload) + `"}`)
}

// BenchmarkDecodeFrame decodes client frames in place: a publish of a
// 1 KiB payload, where the scan of the payload's string is nearly all the
// work, and a short subscribe, where the keys and the object's syntax are.
func BenchmarkDecodeFrame(b *testing.B) {
	for _, bc := range []struct {
		name  string
		frame []byte
	}{
		{"publish1KiB", benchPublishFrame()},
		{"subscribe", []byte(`{"type":"subscribe","channel":"org/x/y"}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.frame)))
			b.ReportAllocs()
			for b.Loop() {
				f, err := decodeFrame(bc.frame)
				if err != nil || len(f.Type) == 0 {
					b.Fatalf("decodeFrame: %+v, %v", f, err)
				}
			}
		})
	}
}
