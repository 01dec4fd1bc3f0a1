package seat

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"

	"github.com/skytale-oss/skytale/internal/base58"
	"github.com/skytale-oss/skytale/internal/devcert"
	"github.com/skytale-oss/skytale/mls"
)

// A room member's identity (its leaf's BasicCredential) names a person by
// the did:key of the person's identity key, and the leaf is signed by that
// key or by a device key the person vouched for:
//
//	did:key:z6Mk…                   the leaf's signature key is the one the did:key names
//	did:key:z6Mk…#dev:z<signature>  the leaf's signature key is a device key, and
//	                                <signature> is the person's Ed25519 signature over
//	                                deviceKeyLabel followed by that device key (base58btc)
//
// Either way nobody can pose as someone else: a leaf for a person takes
// that person's key, or that person's signature over the leaf's own key.
// A person's devices thus have leaves of their own (one per device key,
// each with its own identity) and show as one person. Only the person's
// key can vouch, so a device cannot vouch for another; and a device
// identity for the person's own key is refused, so every key has one
// identity.

// deviceKeyLabel is what a person's key signs before a device key.
const deviceKeyLabel = "skytale device key v1\x00"

// deviceMark separates the person's did:key from the device signature.
const deviceMark = "#dev:z"

var errDeviceIdentity = errors.New("seat: a device identity must carry the person's signature over the leaf's key")

// DeviceIdentity is the member identity of a device whose signing key is
// devicePub, vouched for by person.
func DeviceIdentity(person *Identity, devicePub ed25519.PublicKey) string {
	sig := ed25519.Sign(person.PrivateKey(), append([]byte(deviceKeyLabel), devicePub...))
	return person.DID() + deviceMark + base58.Encode(sig)
}

// PersonOf is the did:key of the person a member identity names.
func PersonOf(identity string) string {
	person, _, _ := strings.Cut(identity, "#")
	return person
}

// isDeviceIdentity reports whether a member identity is a device's (a
// device key vouched for, or a linked device's certificate).
func isDeviceIdentity(id string) bool {
	return strings.Contains(id, deviceMark) || strings.Contains(id, devcert.IdentityMark)
}

// validateCredential is the seat's Authentication Service (RFC 9420
// §5.3.1): a leaf's credential is a basic credential with a member
// identity as above, and the leaf's signature key is the person's key or
// a device key the person signed.
func validateCredential(cred mls.Credential, signatureKey []byte) error {
	if cred.CredentialType != mls.CredentialTypeBasic {
		return errors.New("seat: a member's credential must be a basic credential")
	}
	if did, compact, ok := devcert.SplitIdentity(string(cred.Identity)); ok {
		// A linked device: the person's certificate of the leaf's key.
		pub, err := ParseDIDKey(did)
		if err != nil {
			return err
		}
		if _, err := devcert.Parse(pub, signatureKey, compact); err != nil {
			return errors.New("seat: a linked device's leaf must carry its person's certificate of the leaf's key")
		}
		return nil
	}
	person, sig58, device := strings.Cut(string(cred.Identity), deviceMark)
	pub, err := ParseDIDKey(person)
	if err != nil {
		return err
	}
	if !device {
		if !bytes.Equal(pub, signatureKey) {
			return errors.New("seat: the leaf's signature key is not the key its did:key names")
		}
		return nil
	}
	sig, err := base58.Decode(sig58)
	if err != nil || len(sig) != ed25519.SignatureSize || len(signatureKey) != ed25519.PublicKeySize || len(sig58) > 90 {
		return errDeviceIdentity
	}
	if bytes.Equal(pub, signatureKey) {
		return errors.New("seat: a person's own key has no device identity")
	}
	if !ed25519.Verify(pub, append([]byte(deviceKeyLabel), signatureKey...), sig) {
		return errDeviceIdentity
	}
	// One spelling per signature: the encoding must be the canonical one.
	if base58.Encode(sig) != sig58 {
		return errDeviceIdentity
	}
	return nil
}
