package mls

import (
	"crypto/subtle"
	"errors"
	"fmt"
)

// This file holds the cryptographic steps of joining a group from a Welcome
// message (RFC 9420 §12.4.3.1), and the matching steps for the committer
// who builds one. Validating the ratchet tree and building the group state
// are left to the caller; what happens here is:
//
//  1. find the EncryptedGroupSecrets addressed to our KeyPackage, by its
//     KeyPackageRef, and decrypt it with the KeyPackage's init key;
//  2. run the key schedule from the joiner_secret and the PSKs it names up
//     to the welcome_secret, and decrypt the GroupInfo;
//  3. verify the GroupInfo signature with the signer's key (taken by the
//     caller from the ratchet tree, leaf GroupInfo.signer);
//  4. only then derive the epoch secrets, check the confirmation tag and
//     compute the interim transcript hash.
//
// Step 4 is refused until step 3 has succeeded.

var (
	errNoWelcomeForUs      = errors.New("mls: welcome has no secrets for this key package")
	errWelcomeSuite        = errors.New("mls: welcome cipher suite does not match")
	errBadGroupInfo        = errors.New("mls: cannot decrypt group info")
	errGroupInfoSignature  = errors.New("mls: invalid group info signature")
	errBadConfirmationTag  = errors.New("mls: invalid confirmation tag")
	errGroupInfoUnverified = errors.New("mls: group info signature not verified")
)

// pskResolver returns the PSK values for the PreSharedKeyIDs a Welcome
// names, in order, or an error when the client does not hold one of them
// (§12.4.3.1).
type pskResolver func(ids []PreSharedKeyID) ([][]byte, error)

// welcomeJoin is a Welcome opened for one of our KeyPackages.
type welcomeJoin struct {
	s            suite
	groupSecrets welcomeSecrets
	groupInfo    GroupInfo
	member       *memberSecret
	verified     bool
}

// openWelcome performs steps 1 and 2 above for keyPackage, whose init key's
// private key is initPriv. psks may be nil when the Welcome names no PSKs.
func openWelcome(w *welcomeMessage, keyPackage *KeyPackage, initPriv []byte, psks pskResolver) (*welcomeJoin, error) {
	if w.CipherSuite != keyPackage.CipherSuite {
		return nil, errWelcomeSuite
	}
	s, err := suiteFor(w.CipherSuite)
	if err != nil {
		return nil, err
	}
	ref := makeKeyPackageRef(s, marshal(keyPackage))
	var egs *encryptedGroupSecrets
	for i := range w.Secrets {
		if subtle.ConstantTimeCompare(w.Secrets[i].NewMember, ref) == 1 {
			egs = &w.Secrets[i]
			break
		}
	}
	if egs == nil {
		return nil, errNoWelcomeForUs
	}

	// encrypted_group_secrets = EncryptWithLabel(init_key, "Welcome",
	//                               encrypted_group_info, group_secrets)
	pt, err := decryptWithLabel(s, initPriv, "Welcome", w.EncryptedGroupInfo,
		egs.EncryptedGroupSecrets.KEMOutput, egs.EncryptedGroupSecrets.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("mls: cannot decrypt group secrets: %w", err)
	}
	j := &welcomeJoin{s: s}
	if err := unmarshal(pt, &j.groupSecrets); err != nil {
		return nil, fmt.Errorf("mls: malformed group secrets: %w", err)
	}
	clear(pt)

	if err := checkWelcomePSKs(j.groupSecrets.PSKs); err != nil {
		return nil, err
	}
	var pskValues [][]byte
	if len(j.groupSecrets.PSKs) > 0 {
		if psks == nil {
			return nil, errors.New("mls: welcome requires PSKs that are not available")
		}
		if pskValues, err = psks(j.groupSecrets.PSKs); err != nil {
			return nil, err
		}
	}
	psk, err := pskSecret(s, j.groupSecrets.PSKs, pskValues)
	if err != nil {
		return nil, err
	}
	joiner, err := newJoinerSecret(s, j.groupSecrets.JoinerSecret)
	if err != nil {
		return nil, err
	}
	// The joiner secret now belongs to the key schedule, which wipes it.
	j.groupSecrets.JoinerSecret = nil
	if j.member, err = joiner.withPSK(psk); err != nil {
		return nil, err
	}
	welcomeSecret, err := j.member.welcomeSecret()
	if err != nil {
		return nil, err
	}
	key, nonce := welcomeKeyNonce(s, welcomeSecret)
	clear(welcomeSecret)
	giBytes, err := s.aeadOpen(key, nonce, nil, w.EncryptedGroupInfo)
	clear(key)
	clear(nonce)
	if err != nil {
		return nil, errBadGroupInfo
	}
	if err := unmarshal(giBytes, &j.groupInfo); err != nil {
		return nil, fmt.Errorf("mls: malformed group info: %w", err)
	}
	if j.groupInfo.GroupContext.CipherSuite != w.CipherSuite {
		return nil, errWelcomeSuite
	}
	return j, nil
}

// checkWelcomePSKs enforces §12.4.3.1: a resumption PSK with usage reinit
// or branch must be the only such PSK.
func checkWelcomePSKs(ids []PreSharedKeyID) error {
	n := 0
	for _, id := range ids {
		if id.PSKType == PSKTypeResumption &&
			(id.Usage == ResumptionPSKUsageReInit || id.Usage == ResumptionPSKUsageBranch) {
			n++
		}
	}
	if n > 1 {
		return errors.New("mls: more than one reinit or branch PSK in welcome")
	}
	return nil
}

// verifySigner checks the GroupInfo signature (step 3) with the signature
// key of the leaf at GroupInfo.signer.
func (j *welcomeJoin) verifySigner(signerPub []byte) error {
	if !j.groupInfo.verifySignature(j.s, signerPub) {
		return errGroupInfoSignature
	}
	j.verified = true
	return nil
}

// epoch performs step 4: it derives the epoch secrets from the verified
// GroupInfo's GroupContext, checks the GroupInfo's confirmation tag against
// the confirmation key and confirmed transcript hash, and returns the
// interim transcript hash of the new state (§8.2).
func (j *welcomeJoin) epoch() (es *epochSecrets, interim []byte, err error) {
	if !j.verified {
		return nil, nil, errGroupInfoUnverified
	}
	gc := &j.groupInfo.GroupContext
	es, err = j.member.epoch(gc)
	if err != nil {
		return nil, nil, err
	}
	if !es.verifyConfirmationTag(gc.ConfirmedTranscriptHash, j.groupInfo.ConfirmationTag) {
		return nil, nil, errBadConfirmationTag
	}
	return es, interimTranscriptHash(j.s, gc.ConfirmedTranscriptHash, j.groupInfo.ConfirmationTag), nil
}

// sealGroupInfo encrypts a signed GroupInfo for a Welcome under the key and
// nonce from welcome_secret (§12.4.3.1).
func sealGroupInfo(s suite, welcomeSecret []byte, gi *GroupInfo) ([]byte, error) {
	key, nonce := welcomeKeyNonce(s, welcomeSecret)
	defer clear(key)
	defer clear(nonce)
	return s.aeadSeal(key, nonce, nil, marshal(gi))
}

// sealGroupSecrets encrypts GroupSecrets to a new member's KeyPackage
// (§12.4.3.1), bound to the Welcome's encrypted GroupInfo.
func sealGroupSecrets(s suite, keyPackage *KeyPackage, gs *welcomeSecrets, encryptedGroupInfo []byte) (encryptedGroupSecrets, error) {
	if keyPackage.CipherSuite != s.id() {
		return encryptedGroupSecrets{}, errWelcomeSuite
	}
	pt := marshal(gs)
	defer clear(pt)
	kemOutput, ct, err := encryptWithLabel(s, keyPackage.InitKey, "Welcome", encryptedGroupInfo, pt)
	if err != nil {
		return encryptedGroupSecrets{}, err
	}
	return encryptedGroupSecrets{
		NewMember:             makeKeyPackageRef(s, marshal(keyPackage)),
		EncryptedGroupSecrets: hpkeCiphertext{KEMOutput: kemOutput, Ciphertext: ct},
	}, nil
}
