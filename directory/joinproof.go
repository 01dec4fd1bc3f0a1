package directory

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
)

// Proof of possession at an invite join.
//
// A join by an auto invite names the identity its holder will join the
// room as, and the directory records that identity with the joiner's
// account (channel_identities): a removal by the identity later ends the
// account's membership. Naming an identity whose key the joiner does not
// hold would tie another person's identity to the joiner's account, so the
// join carries proof: the Ed25519 signature of the identity's member key
// over [JoinProof] of the caller's account, the channel, the identity and
// the SHA-256 of the token shown. For a did:key that key is the did:key's;
// for a device identity "<did:key>#dev:z<sig>" it is device_key, whose
// certificate (sig) is checked as for the key-package stock. The proof is
// then good for one account, one channel, one identity and one invite:
// nobody who sees it can use it for anything else, and the invite's own
// expiry bounds it in time (a time of its own would add only a failure
// for clocks that differ). A join by an auto invite without a proof is
// 403 proof_required, one with a proof that does not verify 403
// invalid_proof; either changes nothing and uses nothing. A join by an
// invite that waits for the owner may carry a proof (it is then checked
// too) and needs none: the owner's seat checks the key package it admits.

// JoinProofLabel starts what a joiner's member key signs to join a channel
// by invite under its identity.
const JoinProofLabel = "skytale invite join v1\x00"

// JoinProof is the message a joiner's member key signs to join channel by
// invite under identity, for account, with the token whose SHA-256 is
// tokenHash (POST /v1/channels/join "proof").
func JoinProof(account, channel, identity string, tokenHash []byte) []byte {
	m := make([]byte, 0, len(JoinProofLabel)+len(account)+len(channel)+len(identity)+3+len(tokenHash))
	m = append(m, JoinProofLabel...)
	m = append(m, account...)
	m = append(m, 0)
	m = append(m, channel...)
	m = append(m, 0)
	m = append(m, identity...)
	m = append(m, 0)
	return append(m, tokenHash...)
}

var (
	errProofRequired = errors.New("directory: a join by an auto invite needs proof of the identity's key")
	errInvalidProof  = errors.New("directory: the join's proof does not verify for the identity it names")
)

// checkJoinProof checks proof, a signature over JoinProof(account,
// channel, identity, tokenHash), against the member key of identity: the
// did:key's own, or deviceKey for a device identity whose certificate
// verifies. Anything else is errInvalidProof.
func checkJoinProof(account, channel, identity string, deviceKey, tokenHash, proof []byte) error {
	person, err := checkDeviceName(identity, deviceKey)
	if err != nil {
		return errInvalidProof
	}
	key := ed25519.PublicKey(deviceKey)
	if person == identity {
		if deviceKey != nil {
			return errInvalidProof // a did:key's member key is its own
		}
		if key, err = parseDIDKey(person); err != nil {
			return errInvalidProof
		}
	}
	if len(proof) != ed25519.SignatureSize || !ed25519.Verify(key, JoinProof(account, channel, identity, tokenHash), proof) {
		return errInvalidProof
	}
	return nil
}

// inviteIsAuto reports whether the invite (or federation invite, with
// fed) of hash is an auto invite. An invite's kind never changes after it
// is made, so the answer read here holds for the join's transaction; an
// invite that does not exist is reported as not auto, and the join then
// refuses it as it would any unknown token.
func (s *store) inviteIsAuto(ctx context.Context, hash []byte, fed bool) (bool, error) {
	q := `SELECT auto FROM invites WHERE hash = ?`
	if fed {
		q = `SELECT auto FROM federation_invites WHERE hash = ?`
	}
	var auto int
	err := s.queryRow(ctx, q, hash).Scan(&auto)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return auto == 1, err
}

// checkJoinRequestProof applies the rules above to a join request for
// account: it reports false once it has answered.
func (s *Server) checkJoinRequestProof(w http.ResponseWriter, r *http.Request, account string, req *joinRequestBody, tokenHash []byte) bool {
	if req.Proof == "" {
		if req.DeviceKey != "" {
			badRequest(w, "device_key goes with proof")
			return false
		}
		auto, err := s.store.inviteIsAuto(r.Context(), tokenHash, req.FederationToken != "")
		if err != nil {
			s.fail(w, r, err)
			return false
		}
		if auto {
			s.fail(w, r, errProofRequired)
			return false
		}
		return true
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(req.Proof)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_base64", "proof is not standard base64")
		return false
	}
	var deviceKey []byte
	if req.DeviceKey != "" {
		if deviceKey, err = base64.StdEncoding.Strict().DecodeString(req.DeviceKey); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_base64", "device_key is not standard base64")
			return false
		}
	}
	if err := checkJoinProof(account, req.Channel, req.Identity, deviceKey, tokenHash, proof); err != nil {
		s.fail(w, r, err)
		return false
	}
	return true
}
