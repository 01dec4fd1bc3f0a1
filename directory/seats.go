package directory

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/internal/base58"
	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/internal/devcert"
)

// Identities the directory checks: a seat's did:key (Ed25519) proves
// possession of its key when it registers, and a device of it is named
// "<did:key>#dev:z<signature>", the person's Ed25519 signature over
// DeviceKeyLabel and the device's public key in base58btc (the member
// identity the seat writes in its leaves).
const (
	didKeyPrefix = "did:key:z"
	deviceMark   = "#dev:z"
	// SeatProofLabel starts what a seat's identity key signs to register:
	// the label, the account id, a NUL, and the sync channel. Binding the
	// account and the channel means a proof seen by one directory account
	// cannot register the identity for another.
	SeatProofLabel = "skytale seat registration v1\x00"
	// DeviceKeyLabel starts what a person's identity key signs to certify
	// one of their device keys.
	DeviceKeyLabel = "skytale device key v1\x00"
)

var errBadDID = errors.New("directory: not an Ed25519 did:key")

// parseDIDKey returns the Ed25519 public key of a did:key in its one
// canonical spelling (multicodec 0xed 0x01, base58btc).
func parseDIDKey(did string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(did, didKeyPrefix)
	if !ok || len(rest) > 64 {
		return nil, errBadDID
	}
	b, err := base58.Decode(rest)
	if err != nil || len(b) != 2+ed25519.PublicKeySize || b[0] != 0xed || b[1] != 0x01 || base58.Encode(b) != rest {
		return nil, errBadDID
	}
	return ed25519.PublicKey(b[2:]), nil
}

// SeatProof is the message a seat's identity key signs to register it for
// account with its sync channel (POST /v1/seats "proof").
func SeatProof(account, channel string) []byte {
	return []byte(SeatProofLabel + account + "\x00" + channel)
}

// checkDeviceName splits a stock device name into the person's did:key it
// belongs to, and checks a device identity's certificate: for
// "<did>#dev:z<sig>", sig must be the did's key's signature over
// DeviceKeyLabel and deviceKey, in its canonical spelling, and deviceKey
// must not be the person's own key. A plain did:key needs no device key.
func checkDeviceName(device string, deviceKey []byte) (person string, err error) {
	if did, compact, ok := devcert.SplitIdentity(device); ok {
		// A linked device: its certificate is the identity's signature
		// over deviceKey (devices.go).
		pub, err := parseDIDKey(did)
		if err != nil {
			return "", errIdentityNotYours
		}
		if _, err := devcert.Parse(pub, deviceKey, compact); err != nil {
			return "", errIdentityNotYours
		}
		return did, nil
	}
	person, sig58, isDevice := strings.Cut(device, deviceMark)
	pub, err := parseDIDKey(person)
	if err != nil {
		return "", errIdentityNotYours
	}
	if !isDevice {
		return person, nil
	}
	sig, err := base58.Decode(sig58)
	if err != nil || len(sig) != ed25519.SignatureSize || base58.Encode(sig) != sig58 ||
		len(deviceKey) != ed25519.PublicKeySize || bytes.Equal(deviceKey, pub) ||
		!ed25519.Verify(pub, append([]byte(DeviceKeyLabel), deviceKey...), sig) {
		return "", errIdentityNotYours
	}
	return person, nil
}

type registerSeatRequest struct {
	Identity string `json:"identity"`
	Channel  string `json:"channel"`
	// Proof is the identity key's Ed25519 signature over
	// SeatProof(account, channel), standard base64.
	Proof string `json:"proof"`
}

type registerSeatResponse struct {
	SeatID     string `json:"seat_id"`
	Credential string `json:"credential"`
}

// POST /v1/seats {identity, channel, proof} → 201 {seat_id, credential}
//
// Registers a seat's did:key identity and its sync channel (registering the
// channel for the account if nobody has) and answers a channel-scoped
// sk_chan_ credential. An identity registers once: a second registration is
// 409 even when byte-identical, because the guard is the point.
//
// The registration proves possession of the identity key: proof is its
// signature over SeatProof(caller's account, channel); anything else is
// 403 invalid_proof and changes nothing, so nobody can register (squat)
// someone else's did:key and then publish join offers under it. Seats
// registered before proofs were asked for stay registered.
func (s *Server) handleRegisterSeat(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	if p.device != "" {
		// A linked device holds no identity; one it registered could
		// certify and revoke devices of the account (devices.go).
		writeError(w, http.StatusForbidden, "forbidden", "a linked device cannot register an identity")
		return
	}
	var req registerSeatRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	if !strings.HasPrefix(req.Identity, "did:key:") || len(req.Identity) == len("did:key:") ||
		!storable(req.Identity) || utf8.RuneCountInString(req.Identity) > MaxIdentity {
		badRequest(w, "identity must be a did:key of at most 256 characters, none of them NUL")
		return
	}
	if !checkChannel(w, p, req.Channel) {
		return
	}
	pub, err := parseDIDKey(req.Identity)
	if err != nil {
		badRequest(w, "identity must be an Ed25519 did:key (did:key:z6Mk…)")
		return
	}
	proof, err := base64.StdEncoding.DecodeString(req.Proof)
	if err != nil || len(proof) != ed25519.SignatureSize || !ed25519.Verify(pub, SeatProof(p.account, req.Channel), proof) {
		writeError(w, http.StatusForbidden, "invalid_proof",
			"proof must be the identity key's signature over the seat registration label, the account id and the channel")
		return
	}
	if org, _, _ := channel.Split(req.Channel); org != p.org {
		writeError(w, http.StatusForbidden, "wrong_org", "an account registers channels only under its own org")
		return
	}
	seatID, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chID, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cred, hash, err := s.newSecret(prefixChanKey)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.registerSeat(r.Context(), seatID, chID, req.Identity, p.account, req.Channel, hash, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, registerSeatResponse{SeatID: seatID, Credential: cred})
}
