package seat

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Sync key epochs.
//
// The personal log is sealed under a sync key of an epoch. Epoch 0 is the
// key the phrase derives (labelSyncKey); a batch of epoch 0 has the magic
// "SKB1" and names no epoch, so every batch from before epochs is epoch 0.
// When a linked device is revoked, the revoking device (which holds the
// identity) makes a random key for the next epoch and publishes it on the
// sync channel, before anything is sealed under it, in key bundles:
//
//	"SKK1" | epoch (uint32) | recipient (32) | box length (uint16) | box | signature (64)
//
// one per remaining linked device (recipient its signing key, the box
// HPKE-sealed to the X25519 key of its certificate, info
// keyBoxInfo | channel | epoch) and one for the homes that hold the
// phrase (recipient all zero, the box AES-256-GCM under a key the phrase
// derives, labelSyncWrap). The signature is the identity key's over
// keyBundleLabel | channel | NUL | the bytes before it, so nobody but the
// identity holder can hand a device a key to seal under. Every device
// learns the bundles addressed to it when it pulls (and before it
// pushes), seals new batches under the newest epoch it holds, and opens
// each batch with the key of the epoch the batch names. The revoked
// device gets no bundle: whatever is pushed after the revocation is
// sealed under a key it never had.

const (
	keyBundleMagic = "SKK1"
	keyBundleLabel = "skytale sync key v1\x00"
	keyBoxInfo     = "skytale sync key box v1 "
	labelSyncWrap  = "skytale seat sync key wrap v1"
	// maxKeyBox bounds a key bundle's box: an HPKE box of a 32-byte key
	// is 32 + 32 + 16 bytes, the wrapped one 12 + 32 + 16.
	maxKeyBox = 128
)

var errKeyBundle = errors.New("seat: not a key bundle of this identity")

// syncKey is one epoch's key.
type syncKey struct {
	epoch uint32
	raw   []byte
	key   *SyncKey
}

func newEpochKey(epoch uint32, raw []byte) (syncKey, error) {
	k, err := newSyncKey(raw)
	if err != nil {
		return syncKey{}, err
	}
	k.epoch = epoch
	return syncKey{epoch: epoch, raw: raw, key: k}, nil
}

func syncKeyMeta(epoch uint32) string { return "sync_key:" + strconv.FormatUint(uint64(epoch), 10) }

// storeSyncKey keeps the key of epoch (sealed). A home with the phrase
// derives epoch 0 and keeps only later ones.
func (s *Seat) storeSyncKey(ctx context.Context, epoch uint32, raw []byte) error {
	if epoch == 0 && s.HoldsIdentity() {
		return nil
	}
	return s.putSecret(ctx, syncKeyMeta(epoch), sealedSyncKey, raw)
}

// syncKeys returns every epoch key this home holds, oldest first.
func (s *Seat) syncKeys(ctx context.Context) ([]syncKey, error) {
	var out []syncKey
	s.mu.Lock()
	seed := s.seed
	s.mu.Unlock()
	if seed != nil {
		k, err := newEpochKey(0, seed.derive(labelSyncKey, 32))
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	rows, err := s.st.db.QueryContext(ctx, `SELECT key FROM meta WHERE key LIKE 'sync_key:%'`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		e, err := strconv.ParseUint(strings.TrimPrefix(n, "sync_key:"), 10, 32)
		if err != nil {
			continue
		}
		raw, err := s.getSecret(ctx, n, sealedSyncKey)
		if err != nil {
			return nil, err
		}
		if len(raw) != 32 {
			return nil, errors.New("seat: a stored sync key is damaged")
		}
		k, err := newEpochKey(uint32(e), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b syncKey) int { return int(int64(a.epoch) - int64(b.epoch)) })
	return out, nil
}

// newestSyncKey is the key new batches are sealed under.
func (s *Seat) newestSyncKey(ctx context.Context) (*SyncKey, error) {
	keys, err := s.syncKeys(ctx)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, ErrNoSeed
	}
	return keys[len(keys)-1].key, nil
}

// SyncEpoch is the newest sync key epoch this home holds.
func (s *Seat) SyncEpoch(ctx context.Context) (uint32, error) {
	k, err := s.newestSyncKey(ctx)
	if err != nil {
		return 0, err
	}
	return k.Epoch(), nil
}

func keyBundleMessage(ch string, body []byte) []byte {
	m := make([]byte, 0, len(keyBundleLabel)+len(ch)+1+len(body))
	m = append(m, keyBundleLabel...)
	m = append(m, ch...)
	m = append(m, 0)
	return append(m, body...)
}

// encodeKeyBundle signs a bundle of epoch for recipient.
func encodeKeyBundle(id ed25519.PrivateKey, ch string, epoch uint32, recipient, box []byte) []byte {
	b := make([]byte, 0, 4+4+32+2+len(box)+ed25519.SignatureSize)
	b = append(b, keyBundleMagic...)
	b = binary.BigEndian.AppendUint32(b, epoch)
	b = append(b, recipient...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(box)))
	b = append(b, box...)
	return append(b, ed25519.Sign(id, keyBundleMessage(ch, b))...)
}

// parseKeyBundle reads a key bundle on ch and checks that person signed
// it.
func parseKeyBundle(b []byte, ch string, person ed25519.PublicKey) (epoch uint32, recipient, box []byte, err error) {
	const head = 4 + 4 + 32 + 2
	if len(b) < head+ed25519.SignatureSize || !bytes.HasPrefix(b, []byte(keyBundleMagic)) {
		return 0, nil, nil, errKeyBundle
	}
	n := int(binary.BigEndian.Uint16(b[40:42]))
	if n > maxKeyBox || len(b) != head+n+ed25519.SignatureSize {
		return 0, nil, nil, errKeyBundle
	}
	body, sig := b[:head+n], b[head+n:]
	if len(person) != ed25519.PublicKeySize || !ed25519.Verify(person, keyBundleMessage(ch, body), sig) {
		return 0, nil, nil, errKeyBundle
	}
	return binary.BigEndian.Uint32(b[4:8]), bytes.Clone(b[8:40]), bytes.Clone(b[head : head+n]), nil
}

func keyBoxInfoFor(ch string, epoch uint32) []byte {
	return strconv.AppendUint([]byte(keyBoxInfo+ch+" "), uint64(epoch), 10)
}

// wrapAEAD is the phrase holders' key wrap.
func wrapAEAD(seed *Seed) (cipher.AEAD, error) {
	k := seed.derive(labelSyncWrap, 32)
	defer clear(k)
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}

var phraseRecipient = make([]byte, 32)

// installKeyBundle learns the key in a bundle on ch if it is addressed to
// this home and new here; it reports whether the payload was a bundle.
func (s *Seat) installKeyBundle(ctx context.Context, ch string, payload []byte, have map[uint32]*SyncKey) (bool, error) {
	if !bytes.HasPrefix(payload, []byte(keyBundleMagic)) {
		return false, nil
	}
	_, person, err := s.person()
	if err != nil {
		return true, err
	}
	epoch, recipient, box, err := parseKeyBundle(payload, ch, person)
	if err != nil || have[epoch] != nil || epoch == 0 {
		return true, nil // not the identity's, or known: not for us to use
	}
	var raw []byte
	s.mu.Lock()
	seed := s.seed
	s.mu.Unlock()
	switch {
	case seed != nil && bytes.Equal(recipient, phraseRecipient):
		aead, err := wrapAEAD(seed)
		if err != nil {
			return true, err
		}
		raw, err = aead.Open(nil, nil, box, payload[:8+32])
		if err != nil {
			return true, nil
		}
	case seed == nil:
		sk, err := s.deviceSigningKey(ctx)
		if err != nil {
			return true, err
		}
		if !bytes.Equal(recipient, sk.Public().(ed25519.PublicKey)) {
			return true, nil // another device's
		}
		xk, err := s.hpkeKey(ctx)
		if err != nil {
			return true, err
		}
		hk, err := hpke.NewDHKEMPrivateKey(xk)
		if err != nil {
			return true, err
		}
		if raw, err = hpke.Open(hk, hpke.HKDFSHA256(), hpke.AES128GCM(), keyBoxInfoFor(ch, epoch), box); err != nil {
			return true, nil
		}
	default:
		return true, nil
	}
	if len(raw) != 32 {
		return true, nil
	}
	k, err := newEpochKey(epoch, raw)
	if err != nil {
		return true, err
	}
	if err := s.storeSyncKey(ctx, epoch, raw); err != nil {
		return true, err
	}
	have[epoch] = k.key
	return true, nil
}

// keyMap is the home's keys by epoch.
func (s *Seat) keyMap(ctx context.Context) (map[uint32]*SyncKey, error) {
	keys, err := s.syncKeys(ctx)
	if err != nil {
		return nil, err
	}
	m := map[uint32]*SyncKey{}
	for _, k := range keys {
		m[k.epoch] = k.key
	}
	return m, nil
}

// learnKeys reads the sync channel from the last place it looked for key
// bundles and keeps those for this home, so that a push seals under the
// newest epoch.
func (s *Seat) learnKeys(ctx context.Context, ch, cred string) error {
	since := uint64(0)
	for _, k := range []string{"keys_seq", "pull_seq"} {
		if v, err := s.st.meta(ctx, k); err == nil {
			if n, _ := strconv.ParseUint(v, 10, 64); n > since {
				since = n
			}
		}
	}
	have, err := s.keyMap(ctx)
	if err != nil {
		return err
	}
	last, err := s.relay(cred).SyncAll(ctx, ch, since, func(e RelayEntry) error {
		_, err := s.installKeyBundle(ctx, ch, e.Payload, have)
		return err
	})
	if err != nil {
		return revokedOr(err)
	}
	if last > since {
		return s.st.setMeta(ctx, "keys_seq", strconv.FormatUint(last, 10))
	}
	return nil
}

// rekey moves the sync key to a new epoch given to the phrase's homes and
// to every linked device the directory lists as not revoked, whose
// certificate this identity signed, except the signing key exclude. It
// returns the new epoch and how many linked devices got it.
func (s *Seat) rekey(ctx context.Context, exclude []byte) (uint32, int, error) {
	id, err := s.identityKey()
	if err != nil {
		return 0, 0, err
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return 0, 0, err
	}
	ch, err := s.SyncChannel(ctx)
	if err != nil {
		return 0, 0, err
	}
	cred, err := s.syncCredential(ctx)
	if err != nil {
		return 0, 0, err
	}
	// Know every epoch there is before making the next one.
	if err := s.learnKeys(ctx, ch, cred); err != nil {
		return 0, 0, err
	}
	cur, err := s.newestSyncKey(ctx)
	if err != nil {
		return 0, 0, err
	}
	epoch := cur.Epoch() + 1
	devs, err := s.directory(key).LinkedDevices(ctx)
	if err != nil {
		return 0, 0, err
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	defer clear(raw)
	aead, err := wrapAEAD(s.seed)
	if err != nil {
		return 0, 0, err
	}
	head := binary.BigEndian.AppendUint32([]byte(keyBundleMagic), epoch)
	head = append(head, phraseRecipient...)
	bundles := [][]byte{encodeKeyBundle(id.PrivateKey(), ch, epoch, phraseRecipient, aead.Seal(nil, nil, raw, head))}
	given := 0
	for _, d := range devs {
		if !d.RevokedAt.IsZero() || bytes.Equal(d.SigningKey, exclude) {
			continue
		}
		hk, err := certifiedHPKE(id.PublicKey(), d)
		if err != nil {
			continue // not a certificate of ours: it gets nothing
		}
		box, err := sealKey(hk, ch, epoch, raw)
		if err != nil {
			return 0, 0, err
		}
		bundles = append(bundles, encodeKeyBundle(id.PrivateKey(), ch, epoch, d.SigningKey, box))
		given++
	}
	conn, err := s.relay(cred).DialPublisher(ctx, ch)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	for _, b := range bundles {
		if _, err := conn.Publish(ctx, ch, b); err != nil {
			return 0, 0, fmt.Errorf("seat: publishing the new sync key: %w", err)
		}
	}
	// Kept only once the others can have it too, so nothing is sealed
	// under a key no other device can get.
	return epoch, given, s.storeSyncKey(ctx, epoch, raw)
}

// certifiedHPKE is the X25519 key of a linked device whose certificate
// person signed.
func certifiedHPKE(person ed25519.PublicKey, d LinkedDevice) (hpke.PublicKey, error) {
	c, err := d.certificate(person)
	if err != nil {
		return nil, err
	}
	pub, err := ecdh.X25519().NewPublicKey(c.HPKEKey)
	if err != nil {
		return nil, err
	}
	return hpke.NewDHKEMPublicKey(pub)
}

// sealKey seals an epoch's key to a linked device's X25519 key.
func sealKey(hk hpke.PublicKey, ch string, epoch uint32, raw []byte) ([]byte, error) {
	return hpke.Seal(hk, hpke.HKDFSHA256(), hpke.AES128GCM(), keyBoxInfoFor(ch, epoch), raw)
}

// hpkePublic is the HPKE form of an X25519 public key.
func hpkePublic(pub *ecdh.PublicKey) (hpke.PublicKey, error) { return hpke.NewDHKEMPublicKey(pub) }
