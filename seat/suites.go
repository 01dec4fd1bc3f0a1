package seat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/skytale-oss/skytale/mls"
)

// A room's cipher suite is chosen when it is created and never changes:
// every KeyPackage, Welcome and Commit of the room is of that suite, and the
// engine refuses anything else (RFC 9420 §12.2).
const (
	// SuiteClassic is MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519, the
	// suite every RFC 9420 implementation must support (§17.1).
	SuiteClassic = mls.MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519
	// SuitePQ is MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519 (0x004D):
	// X-Wing, the hybrid of ML-KEM-768 and X25519, for every HPKE use, so
	// that ciphertext recorded today stays closed to a quantum computer
	// later. Its code point is the one OpenMLS and ts-mls use; it is not in
	// the IANA registry yet.
	SuitePQ = mls.MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519
	// Suite is the suite of new rooms unless [RoomOptions] names another:
	// the post-quantum one. At 1,000 members its commits cost 1.9 times
	// and its joins 1.5 times what the classic suite's do, and with large
	// trees out of band (tree.go) and handshakes of up to 16 MiB at the
	// relay the servers' caps admit rooms of 10,000 members in either
	// suite. See docs/BENCHMARKS.md.
	Suite = SuitePQ
)

// roomSuites are the suites a seat offers when it asks to join a room,
// whose suite it does not know yet.
var roomSuites = []mls.CipherSuite{SuitePQ, SuiteClassic}

// RoomOptions are the choices made when a room is created.
type RoomOptions struct {
	// Suite is the room's cipher suite, SuitePQ or SuiteClassic; zero
	// means [Suite].
	Suite mls.CipherSuite
}

// SuiteName is the short name of a room suite: "pq" or "classic", or the
// suite's own name for any other.
func SuiteName(cs mls.CipherSuite) string {
	switch cs {
	case SuitePQ:
		return "pq"
	case SuiteClassic:
		return "classic"
	}
	return cs.String()
}

// ParseSuite reads "pq" or "classic".
func ParseSuite(name string) (mls.CipherSuite, error) {
	switch name {
	case "pq":
		return SuitePQ, nil
	case "classic":
		return SuiteClassic, nil
	}
	return 0, fmt.Errorf("%w: %q (pq or classic)", ErrSuite, name)
}

// A join offer is what a joiner publishes as its key package: one
// KeyPackage per suite in roomSuites, so that the room's admitting member
// picks the one of the room's suite. It is the magic joinOfferMagic, then
// each KeyPackage (an MLSMessage) with a 4-byte big-endian length. A
// single KeyPackage without the magic, as older seats publish, is an
// offer of one.
const joinOfferMagic = "SKJ1"

// maxOfferKeyPackages bounds the KeyPackages of one offer.
const maxOfferKeyPackages = 4

func encodeOffer(kps [][]byte) []byte {
	out := []byte(joinOfferMagic)
	for _, kp := range kps {
		out = binary.BigEndian.AppendUint32(out, uint32(len(kp)))
		out = append(out, kp...)
	}
	return out
}

var errBadOffer = errors.New("seat: malformed join offer")

// decodeOffer returns the KeyPackages of an offer.
func decodeOffer(b []byte) ([][]byte, error) {
	rest, ok := cutPrefix(b, joinOfferMagic)
	if !ok {
		return [][]byte{b}, nil
	}
	var out [][]byte
	for len(rest) > 0 {
		if len(rest) < 4 || len(out) == maxOfferKeyPackages {
			return nil, errBadOffer
		}
		n := binary.BigEndian.Uint32(rest)
		if n == 0 || uint64(n) > uint64(len(rest)-4) {
			return nil, errBadOffer
		}
		out = append(out, rest[4:4+n])
		rest = rest[4+n:]
	}
	if len(out) == 0 {
		return nil, errBadOffer
	}
	return out, nil
}

func cutPrefix(b []byte, p string) ([]byte, bool) {
	if len(b) < len(p) || string(b[:len(p)]) != p {
		return b, false
	}
	return b[len(p):], true
}

// The private half of an offer, as this home stores it (sealed): each
// KeyPackageBundle with a 4-byte length, in the offer's order.
func encodeBundles(bs []*mls.KeyPackageBundle) ([]byte, error) {
	var out []byte
	for _, b := range bs {
		p, err := b.MarshalBinary()
		if err != nil {
			return nil, err
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(p)))
		out = append(out, p...)
		clear(p)
	}
	return out, nil
}

func decodeBundles(b []byte) ([]*mls.KeyPackageBundle, error) {
	var out []*mls.KeyPackageBundle
	for len(b) > 0 {
		if len(b) < 4 || len(out) == maxOfferKeyPackages {
			return nil, errBadOffer
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return nil, errBadOffer
		}
		kb, err := mls.ParseKeyPackageBundle(b[4 : 4+n])
		if err != nil {
			return nil, err
		}
		out = append(out, kb)
		b = b[4+n:]
	}
	if len(out) == 0 {
		return nil, errBadOffer
	}
	return out, nil
}

// checkRoomSuite accepts the suites rooms are made with.
func checkRoomSuite(cs mls.CipherSuite) error {
	if !slices.Contains(roomSuites, cs) {
		return fmt.Errorf("%w (%s)", ErrSuite, cs)
	}
	return nil
}
