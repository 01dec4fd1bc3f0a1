package seat

import (
	"bytes"
	"testing"

	"github.com/skytale-oss/skytale/padding"
)

// FuzzDeviceOffer: any entry payload decodes as an offer or not without
// panicking; a padded offer decodes to its KeyPackage, and encoding that
// again gives back the same bytes.
func FuzzDeviceOffer(f *testing.F) {
	f.Add(encodeDeviceOffer([]byte("a key package")))
	f.Add([]byte("SKD1bare key package"))
	f.Add(padding.Pad([]byte("SKD2other")))
	f.Add([]byte{0, 0, 0, 4, 'S', 'K', 'D', '1'})
	f.Fuzz(func(t *testing.T, p []byte) {
		kp, ok := decodeDeviceOffer(p)
		if !ok || bytes.HasPrefix(p, []byte(deviceOfferMagic)) {
			return
		}
		if again := encodeDeviceOffer(kp); !bytes.Equal(again, p) {
			t.Fatalf("offer %x decodes to %x, which encodes to %x", p, kp, again)
		}
		if !padding.Valid(len(p)) {
			t.Fatalf("a padded offer of %d bytes", len(p))
		}
	})
}
