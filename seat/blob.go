package seat

import "github.com/skytale-oss/skytale/padding"

// Payloads the directory keeps for a while (KeyPackages, Welcomes,
// GroupInfos, ratchet trees) are put padded, as every payload on the relay
// is: the directory holds them as opaque bytes and reads none of them, so
// it stores and hands out a bucket length (padding.Pad of the payload),
// never the payload's own. Whoever reads one back unpads it. A blob that
// is not a padded block (put by a seat from before padding) is taken as it
// is: its bytes are parsed as the MLS structure they must be either way.

// padBlob pads b for the directory, unless the padded block would pass
// limit, the directory's cap for that kind of payload: then b goes as it
// is (only payloads within 12% of the cap, Padmé's largest overhead).
func padBlob(b []byte, limit int) []byte {
	if b == nil || len(b) > padding.MaxPayload || padding.Size(len(b)) > limit {
		return b
	}
	return padding.Pad(b)
}

// unpadBlob returns the payload of a blob read from the directory.
func unpadBlob(b []byte) []byte {
	if p, err := padding.Unpad(b); err == nil {
		return p
	}
	return b
}

// The directory's caps on the payloads a seat pads (docs/API.md).
const (
	maxDirKeyPackage = 64 << 10
	maxDirWelcome    = 256 << 10
	maxDirGroupInfo  = 1 << 20
)
