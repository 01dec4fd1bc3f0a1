package mls

import (
	"crypto/hmac"
	"crypto/hpke"
	"errors"
	"fmt"
	"io"
)

// This file implements the key schedule of RFC 9420 §8 as a chain of types,
// so that the secrets of an epoch can only be derived in the order the RFC
// draws them:
//
//	initSecret   --joiner(commit_secret, GroupContext_[n])--> joinerSecret
//	joinerSecret --withPSK(psk_secret)-----------------------> memberSecret
//	memberSecret --welcomeSecret()---------------------------> welcome_secret
//	memberSecret --epoch(GroupContext_[n])-------------------> epochSecrets
//	epochSecrets --nextInit()--------------------------------> initSecret (n+1)
//
// (The RFC leaves the output of the PSK extraction unnamed; earlier drafts
// called it member_secret, and so does this code.)
//
// Each step consumes its input: the input secret is wiped when the next one
// is derived, following the deletion schedule of §9.2, which lists the
// init_secret of the previous epoch and the joiner_secret and epoch_secret of
// the current one among the values consumed as soon as the epoch is used.

var errSecretConsumed = errors.New("mls: key schedule secret already consumed")

// initSecret is init_secret_[n-1], the secret carried from one epoch to the
// next (§8).
type initSecret struct {
	s      suite
	secret []byte
}

// newInitSecret wraps an init secret of KDF.Nh bytes: a fresh random value
// when a group is created (§11), or the result of external initialisation
// (§8.3). The schedule takes ownership of secret.
func newInitSecret(s suite, secret []byte) (*initSecret, error) {
	if len(secret) != s.hashLen() {
		return nil, errors.New("mls: init secret has the wrong length")
	}
	return &initSecret{s: s, secret: secret}, nil
}

// newRandomInitSecret draws the init secret of a new group's epoch 0 (§11).
func newRandomInitSecret(s suite, rand io.Reader) (*initSecret, error) {
	b := make([]byte, s.hashLen())
	if _, err := io.ReadFull(rand, b); err != nil {
		return nil, fmt.Errorf("mls: reading randomness: %w", err)
	}
	return &initSecret{s: s, secret: b}, nil
}

// joiner derives the joiner_secret of epoch n from this init secret, the
// epoch's commit_secret (all zeros when the Commit has no path, §12.4) and
// GroupContext_[n]:
//
//	joiner_secret = ExpandWithLabel(Extract(init_secret, commit_secret),
//	                                "joiner", GroupContext_[n], KDF.Nh)
//
// The init secret is consumed.
func (i *initSecret) joiner(commitSecret []byte, gc *GroupContext) (*joinerSecret, error) {
	if i.secret == nil {
		return nil, errSecretConsumed
	}
	if commitSecret == nil {
		commitSecret = make([]byte, i.s.hashLen())
	}
	prk := i.s.extract(i.secret, commitSecret)
	j := expandWithLabel(i.s, prk, "joiner", marshal(gc), i.s.hashLen())
	clear(prk)
	clear(i.secret)
	i.secret = nil
	return &joinerSecret{s: i.s, secret: j}, nil
}

// joinerSecret is the joiner_secret of an epoch (§8). Members derive it from
// the previous epoch; new members receive it in GroupSecrets (§12.4.3.1).
type joinerSecret struct {
	s      suite
	secret []byte
}

// newJoinerSecret wraps a joiner_secret received in a Welcome's GroupSecrets.
func newJoinerSecret(s suite, secret []byte) (*joinerSecret, error) {
	if len(secret) != s.hashLen() {
		return nil, errors.New("mls: joiner secret has the wrong length")
	}
	return &joinerSecret{s: s, secret: secret}, nil
}

// bytes returns a copy of the joiner_secret, for the GroupSecrets a committer
// encrypts to new members. Call it before withPSK, which consumes the secret.
func (j *joinerSecret) bytes() []byte {
	return append([]byte(nil), j.secret...)
}

// withPSK mixes in the psk_secret of §8.4 (nil for "no PSKs", the all-zero
// vector) and consumes the joiner secret:
//
//	member_secret = Extract(joiner_secret, psk_secret)
func (j *joinerSecret) withPSK(pskSecret []byte) (*memberSecret, error) {
	if j.secret == nil {
		return nil, errSecretConsumed
	}
	if pskSecret == nil {
		pskSecret = make([]byte, j.s.hashLen())
	}
	m := j.s.extract(j.secret, pskSecret)
	clear(j.secret)
	j.secret = nil
	return &memberSecret{s: j.s, secret: m}, nil
}

// memberSecret is the output of the PSK extraction in §8.
type memberSecret struct {
	s      suite
	secret []byte
}

// welcomeSecret returns welcome_secret = DeriveSecret(member_secret,
// "welcome") (§8), from which the Welcome key and nonce come.
func (m *memberSecret) welcomeSecret() ([]byte, error) {
	if m.secret == nil {
		return nil, errSecretConsumed
	}
	return deriveSecret(m.s, m.secret, "welcome"), nil
}

// welcomeKeyNonce derives the key and nonce that encrypt a Welcome's
// GroupInfo (§12.4.3.1).
func welcomeKeyNonce(s suite, welcomeSecret []byte) (key, nonce []byte) {
	key = expandWithLabel(s, welcomeSecret, "key", nil, s.aeadKeyLen())
	nonce = expandWithLabel(s, welcomeSecret, "nonce", nil, s.aeadNonceLen())
	return key, nonce
}

// epoch derives epoch_secret = ExpandWithLabel(member_secret, "epoch",
// GroupContext_[n], KDF.Nh) and from it every secret of the epoch (§8,
// table "Epoch-Derived Secrets"). Both member_secret and epoch_secret are
// consumed: only the derived secrets remain.
func (m *memberSecret) epoch(gc *GroupContext) (*epochSecrets, error) {
	if m.secret == nil {
		return nil, errSecretConsumed
	}
	s := m.s
	es := expandWithLabel(s, m.secret, "epoch", marshal(gc), s.hashLen())
	clear(m.secret)
	m.secret = nil
	e := &epochSecrets{
		s:                  s,
		senderDataSecret:   deriveSecret(s, es, "sender data"),
		encryptionSecret:   deriveSecret(s, es, "encryption"),
		exporterSecret:     deriveSecret(s, es, "exporter"),
		externalSecret:     deriveSecret(s, es, "external"),
		confirmationKey:    deriveSecret(s, es, "confirm"),
		membershipKey:      deriveSecret(s, es, "membership"),
		resumptionPSK:      deriveSecret(s, es, "resumption"),
		epochAuthenticator: deriveSecret(s, es, "authentication"),
		initSecret:         deriveSecret(s, es, "init"),
	}
	clear(es)
	return e, nil
}

// epochSecrets holds the secrets derived from one epoch_secret (§8).
//
// encryptionSecret and initSecret are handed over exactly once, to the
// secret tree (newSecretTree) and to the next epoch (nextInit); after that
// their fields are nil.
type epochSecrets struct {
	s                  suite
	senderDataSecret   []byte
	encryptionSecret   []byte
	exporterSecret     []byte
	externalSecret     []byte
	confirmationKey    []byte
	membershipKey      []byte
	resumptionPSK      []byte
	epochAuthenticator []byte
	initSecret         []byte
}

// secretTree starts the §9 secret tree of this epoch. It can be called once:
// the tree owns encryption_secret from then on.
func (e *epochSecrets) secretTree(nLeaves uint32, limits secretTreeLimits) (*secretTree, error) {
	if e.encryptionSecret == nil {
		return nil, errSecretConsumed
	}
	t, err := newSecretTree(e.s, e.encryptionSecret, nLeaves, limits)
	if err != nil {
		return nil, err
	}
	e.encryptionSecret = nil
	return t, nil
}

// nextInit hands init_secret_[n] to the next epoch's schedule. It can be
// called once.
func (e *epochSecrets) nextInit() (*initSecret, error) {
	if e.initSecret == nil {
		return nil, errSecretConsumed
	}
	i := &initSecret{s: e.s, secret: e.initSecret}
	e.initSecret = nil
	return i, nil
}

// export is MLS-Exporter (§8.5):
//
//	MLS-Exporter(Label, Context, Length) =
//	    ExpandWithLabel(DeriveSecret(exporter_secret, Label),
//	                    "exported", Hash(Context), Length)
func (e *epochSecrets) export(label string, context []byte, length int) ([]byte, error) {
	if length < 0 || length > 0xffff || length > 255*e.s.hashLen() {
		return nil, fmt.Errorf("mls: invalid exporter length %d", length)
	}
	d := deriveSecret(e.s, e.exporterSecret, label)
	out := expandWithLabel(e.s, d, "exported", e.s.hash(context), length)
	clear(d)
	return out, nil
}

// externalKeyPair derives the group's external HPKE key pair (§8):
// external_priv, external_pub = KEM.DeriveKeyPair(external_secret).
// external_pub goes into the GroupInfo's external_pub extension so that
// non-members can join with an external Commit (§12.4.3.2).
func (e *epochSecrets) externalKeyPair() (priv, pub []byte, err error) {
	return e.s.hpkeDeriveKeyPair(e.externalSecret)
}

// confirmationTag computes MAC(confirmation_key, confirmed_transcript_hash)
// for the Commit that created this epoch, or for a GroupInfo (§6.1, §12.4.3).
func (e *epochSecrets) confirmationTag(confirmedTranscriptHash []byte) []byte {
	return e.s.mac(e.confirmationKey, confirmedTranscriptHash)
}

// verifyConfirmationTag checks a received confirmation tag in constant time.
func (e *epochSecrets) verifyConfirmationTag(confirmedTranscriptHash, tag []byte) bool {
	return hmac.Equal(e.confirmationTag(confirmedTranscriptHash), tag)
}

// externalInitLabel is the HPKE exporter context of §8.3.
const externalInitLabel = "MLS 1.0 external init secret"

// concreteSuite returns the implementation behind a suite, for what the
// suite interface does not offer: the HPKE secret export of external
// initialisation (§8.3) and parsed signature keys.
func concreteSuite(s suite) (*cipherSuite, error) {
	cs, ok := s.(*cipherSuite)
	if !ok {
		return nil, errUnsupportedSuite
	}
	return cs, nil
}

// externalInitSender is the joiner's side of external initialisation
// (§8.3): it encapsulates to the group's external_pub and exports the new
// epoch's init_secret. kemOutput goes into the ExternalInit proposal.
//
//	kem_output, context = SetupBaseS(external_pub, "")
//	init_secret = context.export("MLS 1.0 external init secret", KDF.Nh)
func externalInitSender(s suite, externalPub []byte) (kemOutput []byte, init *initSecret, err error) {
	cs, err := concreteSuite(s)
	if err != nil {
		return nil, nil, err
	}
	if cs.checkHPKEPublicKey(externalPub) != nil {
		return nil, nil, errors.New("mls: invalid external_pub")
	}
	pk, err := cs.kem.NewPublicKey(externalPub)
	if err != nil {
		return nil, nil, errors.New("mls: invalid external_pub")
	}
	enc, sender, err := hpke.NewSender(pk, cs.hpkeKDF, cs.hpkeAEAD, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("mls: external init: %w", err)
	}
	secret, err := sender.Export(externalInitLabel, s.hashLen())
	if err != nil {
		return nil, nil, fmt.Errorf("mls: external init: %w", err)
	}
	return enc, &initSecret{s: s, secret: secret}, nil
}

// externalInitReceiver is the members' side of external initialisation
// (§8.3): from the kem_output of an ExternalInit proposal and the previous
// epoch's external private key it recovers the joiner's init_secret.
//
//	context = SetupBaseR(kem_output, external_priv, "")
//	init_secret = context.export("MLS 1.0 external init secret", KDF.Nh)
func externalInitReceiver(s suite, externalPriv, kemOutput []byte) (*initSecret, error) {
	cs, err := concreteSuite(s)
	if err != nil {
		return nil, err
	}
	// kem_output is the joiner's ephemeral public key for DHKEM (RFC
	// 9180, Section 4.1), a received HPKE key like any other, and a KEM
	// ciphertext for X-Wing.
	if cs.checkKEMOutput(kemOutput) != nil {
		return nil, errors.New("mls: external init: invalid kem_output")
	}
	sk, err := cs.kem.NewPrivateKey(externalPriv)
	if err != nil {
		return nil, errors.New("mls: invalid external private key")
	}
	r, err := hpke.NewRecipient(kemOutput, sk, cs.hpkeKDF, cs.hpkeAEAD, nil)
	if err != nil {
		return nil, errors.New("mls: external init: decapsulation failed")
	}
	secret, err := r.Export(externalInitLabel, s.hashLen())
	if err != nil {
		return nil, fmt.Errorf("mls: external init: %w", err)
	}
	return &initSecret{s: s, secret: secret}, nil
}

// pskSecret computes the psk_secret of §8.4 from the PreSharedKeyIDs listed
// by a Commit or GroupSecrets and the matching PSK values, in that order.
// With no PSKs it is the all-zero vector of length KDF.Nh.
//
//	psk_extracted_[i] = KDF.Extract(0, psk_[i])
//	psk_input_[i]     = ExpandWithLabel(psk_extracted_[i], "derived psk",
//	                                    PSKLabel, KDF.Nh)
//	psk_secret_[0]    = 0
//	psk_secret_[i]    = KDF.Extract(psk_input_[i-1], psk_secret_[i-1])
//
// KDF.Extract(salt, ikm) takes the salt first, so psk_input_[i-1] is the
// salt and psk_secret_[i-1] the input keying material.
func pskSecret(s suite, ids []PreSharedKeyID, psks [][]byte) ([]byte, error) {
	if len(ids) != len(psks) {
		return nil, errors.New("mls: PSK count does not match the PSK IDs")
	}
	if len(ids) > 0xffff {
		return nil, errors.New("mls: too many PSKs")
	}
	zero := make([]byte, s.hashLen())
	secret := make([]byte, s.hashLen())
	for i := range ids {
		// struct { PreSharedKeyID id; uint16 index; uint16 count; } PSKLabel;
		var label builder
		ids[i].marshal(&label)
		label.u16(uint16(i))
		label.u16(uint16(len(ids)))
		extracted := s.extract(zero, psks[i])
		input := expandWithLabel(s, extracted, "derived psk", label.bytes(), s.hashLen())
		next := s.extract(input, secret)
		clear(extracted)
		clear(input)
		clear(secret)
		secret = next
	}
	return secret, nil
}
