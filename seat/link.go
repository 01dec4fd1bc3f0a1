package seat

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/internal/devcert"
)

// Linked devices: a device of a person that never holds the phrase.
//
// A home that holds the phrase holds the person's identity key, and so
// can vouch for anything. A linked home holds only what it was given:
//
//   - its own Ed25519 device key (its room leaves are signed with it) and
//     X25519 key (what is sealed to it), both random, made here, sealed
//     in the home's database;
//   - a certificate of both keys signed by the identity key
//     (internal/devcert), with a serial and an issue time, which its room
//     leaves carry in their identity ("<did:key>#dvc:z…");
//   - an API key of its own (the directory binds it to the certificate,
//     and revoking the device ends it);
//   - the sync keys of the epochs it was given (synckeys.go), sealed to
//     its X25519 key by the approving device;
//   - a local secret in the file device-secret, which seals its database
//     as the phrase seals a phrase home's (localseal.go); it derives from
//     nothing of the person's.
//
// It gets them by a device grant ([Seat.RequestLink], then
// [Seat.WaitLink]): the directory shows a user code; a device holding
// the identity approves it ([Seat.ApproveDevice]) after the person
// compared the fingerprint of both keys, and sends the certificate, the
// sync keys and its rooms in a box sealed to the new device's X25519 key
// and signed by the identity key. The new device checks that signature
// and that the certificate is for its own keys before it keeps anything.
//
// A linked device cannot approve or revoke devices: both take the
// identity key ([ErrNotIdentityHolder]).

// linkSecretFile is a linked home's local secret (hex, 32 bytes).
const linkSecretFile = "device-secret"

// labelLinkedLocal derives a linked home's local store key from its
// secret, as labelLocalKey does from a seed.
const labelLinkedLocal = "skytale linked device local store v1"

// linkBoxLabel starts what the identity key signs in a link box: the
// label, the grant id, a NUL, and the box's JSON.
const linkBoxLabel = "skytale link box v1\x00"

// Sealed kinds of a linked home's secrets.
const (
	sealedHPKEKey = "hpke key"
	sealedSyncKey = "sync key"
)

// linkedHome is what a linked home keeps in memory.
type linkedHome struct {
	secret []byte            // the local secret
	did    string            // the person's did:key, once linked
	pub    ed25519.PublicKey // the person's key
}

func (s *Seat) linkSecretPath() string { return filepath.Join(s.cfg.Home, linkSecretFile) }

// loadLinked reads a linked home's secret and person, if this is one.
func (s *Seat) loadLinked(ctx context.Context) error {
	secret, err := readLinkSecret(s.cfg.Home)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.linked = &linkedHome{secret: secret}
	s.mu.Unlock()
	if did, err := s.st.meta(ctx, "person"); err == nil {
		pub, err := ParseDIDKey(did)
		if err != nil {
			return fmt.Errorf("seat: the linked home's person is damaged: %w", err)
		}
		s.mu.Lock()
		s.linked.did, s.linked.pub = did, pub
		s.mu.Unlock()
	}
	return nil
}

func readLinkSecret(home string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(home, linkSecretFile))
	if err != nil {
		return nil, err
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(secret) != 32 {
		return nil, errors.New("seat: the home's device-secret file is damaged")
	}
	return secret, nil
}

// linkedSealer is the local sealer of a linked home's secret.
func linkedSealer(secret []byte) (*localSealer, error) {
	k, err := hkdf.Key(sha256.New, secret, nil, labelLinkedLocal, 32)
	if err != nil {
		return nil, err
	}
	defer clear(k)
	return newLocalSealerKey(k)
}

// IsLinked reports whether this home is a linked device (no phrase).
func (s *Seat) IsLinked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.linked != nil
}

// HoldsIdentity reports whether this home holds the person's identity
// key (its phrase).
func (s *Seat) HoldsIdentity() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seed != nil
}

// person returns the person's did:key and public key: the phrase's
// identity, or the one a linked home was linked to.
func (s *Seat) person() (string, ed25519.PublicKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.seed != nil:
		id := s.seed.Identity()
		return id.DID(), id.PublicKey(), nil
	case s.linked != nil && s.linked.did != "":
		return s.linked.did, s.linked.pub, nil
	}
	return "", nil, ErrNoSeed
}

// identityKey returns the identity, or ErrNotIdentityHolder.
func (s *Seat) identityKey() (*Identity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seed == nil {
		if s.linked != nil {
			return nil, ErrNotIdentityHolder
		}
		return nil, ErrNoSeed
	}
	return s.seed.Identity(), nil
}

// putSecret stores plain sealed as kind under the meta key.
func (s *Seat) putSecret(ctx context.Context, key, kind string, plain []byte) error {
	l, err := s.sealer()
	if err != nil {
		return err
	}
	return s.st.setMeta(ctx, key, hex.EncodeToString(l.seal(kind, key, plain)))
}

// getSecret opens what putSecret stored.
func (s *Seat) getSecret(ctx context.Context, key, kind string) ([]byte, error) {
	v, err := s.st.meta(ctx, key)
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("seat: the stored %s is damaged", kind)
	}
	l, err := s.sealer()
	if err != nil {
		return nil, err
	}
	return l.open(kind, key, b)
}

// hpkeKey is a linked home's X25519 key.
func (s *Seat) hpkeKey(ctx context.Context) (*ecdh.PrivateKey, error) {
	b, err := s.getSecret(ctx, "hpke_key", sealedHPKEKey)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	return ecdh.X25519().NewPrivateKey(b)
}

// deviceSigningKey is the home's device key (devicerooms.go).
func (s *Seat) deviceSigningKey(ctx context.Context) (ed25519.PrivateKey, error) {
	v, err := s.st.meta(ctx, "device_key")
	if err != nil {
		return nil, err
	}
	sealed, err := hex.DecodeString(v)
	if err != nil {
		return nil, errors.New("seat: the stored device key is damaged")
	}
	l, err := s.sealer()
	if err != nil {
		return nil, err
	}
	seed, err := l.open(sealedDeviceKey, "device", sealed)
	if err != nil {
		return nil, err
	}
	defer clear(seed)
	if len(seed) != ed25519.SeedSize {
		return nil, errors.New("seat: the stored device key is damaged")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// linkFingerprint is the fingerprint of a linked device's two keys.
func linkFingerprint(hpkeKey, signingKey []byte) string {
	return fingerprint(append(append([]byte("skytale link v1\x00"), hpkeKey...), signingKey...))
}

// LinkGrant is this device's pending request to be linked.
type LinkGrant struct {
	GrantTicket
	// Fingerprint digests both of the device's keys, for the person to
	// compare with what the approving device shows.
	Fingerprint string
	// PollInterval is the time between polls; zero means DefaultDevicePoll.
	PollInterval time.Duration
}

// LinkResult is what a linked device received.
type LinkResult struct {
	AccountID, Org string
	// Person is the identity this device now speaks for; DeviceID its
	// own id ([DeviceID] of its member identity).
	Person, DeviceID string
	// Epochs are the sync key epochs it was given.
	Epochs []uint32
	// Offered lists the rooms it offered itself to; OfferErr says why
	// others were not.
	Offered  []string
	OfferErr error
}

// linkBox is what the approving device seals to a linked device.
type linkBox struct {
	Box []byte `json:"box"` // linkContent's JSON
	Sig []byte `json:"sig"` // the identity's signature (linkBoxLabel)
}

type linkContent struct {
	AccountID string     `json:"account_id"`
	Org       string     `json:"org"`
	Person    string     `json:"person"`
	Cert      []byte     `json:"cert"` // compact devcert
	Keys      []epochKey `json:"keys"`
	Rooms     []boxRoom  `json:"rooms,omitempty"`
}

type epochKey struct {
	Epoch uint32 `json:"e"`
	Key   []byte `json:"k"`
}

// RequestLink starts linking this empty home to a person's account as a
// device of its own: it makes the device's keys and asks the directory
// for a user code, to approve on a device that holds the identity. The
// home never gets the phrase.
func (s *Seat) RequestLink(ctx context.Context, label string) (*LinkGrant, error) {
	if s.cfg.APIURL == "" {
		return nil, ErrNoDirectoryURL
	}
	if s.HoldsIdentity() {
		return nil, ErrSeedExists
	}
	if _, _, err := s.person(); err == nil {
		return nil, ErrSignedIn
	}
	if !s.IsLinked() {
		secret := make([]byte, 32)
		rand.Read(secret)
		f, err := os.OpenFile(s.linkSecretPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(hex.EncodeToString(secret) + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(s.linkSecretPath())
			return nil, err
		}
		s.mu.Lock()
		s.linked = &linkedHome{secret: secret}
		s.mu.Unlock()
	}
	// The keys are made once; an interrupted link asks again with them.
	if err := s.makeDeviceKey(ctx); err != nil {
		return nil, err
	}
	if _, err := s.st.meta(ctx, "hpke_key"); errors.Is(err, errNoValue) {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		if err := s.putSecret(ctx, "hpke_key", sealedHPKEKey, k.Bytes()); err != nil {
			return nil, err
		}
	}
	hk, err := s.hpkeKey(ctx)
	if err != nil {
		return nil, err
	}
	sk, err := s.deviceSigningKey(ctx)
	if err != nil {
		return nil, err
	}
	pub := sk.Public().(ed25519.PublicKey)
	t, err := s.directory("").CreateLinkGrant(ctx, hk.PublicKey().Bytes(), pub, label)
	if err != nil {
		return nil, err
	}
	return &LinkGrant{GrantTicket: t, Fingerprint: linkFingerprint(hk.PublicKey().Bytes(), pub)}, nil
}

// CreateLinkGrant asks for a credential for a linked device with the
// X25519 key deviceKey and the Ed25519 key signingKey.
func (c *DirectoryClient) CreateLinkGrant(ctx context.Context, deviceKey, signingKey []byte, label string) (GrantTicket, error) {
	var t GrantTicket
	err := c.call(ctx, "POST", "/v1/device/grants", map[string]any{"device_key": deviceKey, "signing_key": signingKey, "label": label}, &t)
	return t, err
}

// WaitLink polls until g is approved, then checks and keeps what came:
// the credential, the certificate, the sync keys, and offers this device
// to the rooms listed. It returns when ctx is done, with ctx's error.
func (s *Seat) WaitLink(ctx context.Context, g *LinkGrant) (LinkResult, error) {
	p, err := s.pollApproved(ctx, g.GrantID, g.PollToken, g.PollInterval)
	if err != nil {
		return LinkResult{}, err
	}
	return s.finishLink(ctx, g, p)
}

func (s *Seat) finishLink(ctx context.Context, g *LinkGrant, p GrantPoll) (LinkResult, error) {
	xk, err := s.hpkeKey(ctx)
	if err != nil {
		return LinkResult{}, err
	}
	sk, err := s.deviceSigningKey(ctx)
	if err != nil {
		return LinkResult{}, err
	}
	hk, err := hpke.NewDHKEMPrivateKey(xk)
	if err != nil {
		return LinkResult{}, err
	}
	cred, err := hpke.Open(hk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte(grantInfo), p.SealedCredential)
	if err != nil {
		return LinkResult{}, errors.New("seat: the delivered credential does not open with this device key")
	}
	if p.SealedSeat == nil {
		return LinkResult{}, ErrBadLinkBox
	}
	pt, err := openSeatBox(hk, g.GrantID, p.SealedSeat)
	if err != nil {
		return LinkResult{}, ErrBadLinkBox
	}
	defer clear(pt)
	c, err := openLinkBox(pt, g.GrantID, sk.Public().(ed25519.PublicKey), xk.PublicKey().Bytes())
	if err != nil {
		return LinkResult{}, err
	}
	if p.Org != "" && (c.Org != p.Org || c.AccountID != p.AccountID) {
		return LinkResult{}, errors.New("seat: the directory and the approving device name different accounts")
	}
	pub, _ := ParseDIDKey(c.Person)
	cert, _ := devcert.Parse(pub, sk.Public().(ed25519.PublicKey), c.Cert)
	member := devcert.MemberIdentity(c.Person, cert)
	// The keys first: the person and the credential make the home
	// linked, and a home that is linked has its keys.
	res := LinkResult{AccountID: c.AccountID, Org: c.Org, Person: c.Person, DeviceID: DeviceID(member)}
	for _, k := range c.Keys {
		if err := s.storeSyncKey(ctx, k.Epoch, k.Key); err != nil {
			return LinkResult{}, err
		}
		res.Epochs = append(res.Epochs, k.Epoch)
		clear(k.Key)
	}
	if err := s.st.setMeta(ctx, "account_id", c.AccountID, "org", c.Org, "api_key", string(cred),
		"member_identity", member, "person", c.Person); err != nil {
		return LinkResult{}, err
	}
	s.mu.Lock()
	s.linked.did, s.linked.pub = c.Person, pub
	s.mu.Unlock()
	res.Offered, res.OfferErr = s.offerDeviceRooms(ctx, c.Rooms)
	s.Restock(ctx) // this device's own join offers (stock.go)
	return res, nil
}

// openLinkBox checks a link box: signed by the identity it names, over
// this grant, with a certificate of that identity for this device's keys.
func openLinkBox(pt []byte, grantID string, signing ed25519.PublicKey, hpkeKey []byte) (linkContent, error) {
	var b linkBox
	if json.Unmarshal(pt, &b) != nil {
		return linkContent{}, ErrBadLinkBox
	}
	var c linkContent
	if json.Unmarshal(b.Box, &c) != nil {
		return linkContent{}, ErrBadLinkBox
	}
	pub, err := ParseDIDKey(c.Person)
	if err != nil || !ed25519.Verify(pub, linkBoxMessage(grantID, b.Box), b.Sig) {
		return linkContent{}, ErrBadLinkBox
	}
	cert, err := devcert.Parse(pub, signing, c.Cert)
	if err != nil || !bytes.Equal(cert.HPKEKey, hpkeKey) {
		return linkContent{}, ErrBadLinkBox
	}
	if c.AccountID == "" || c.Org == "" {
		return linkContent{}, ErrBadLinkBox
	}
	for _, k := range c.Keys {
		if len(k.Key) != 32 {
			return linkContent{}, ErrBadLinkBox
		}
	}
	return c, nil
}

func linkBoxMessage(grantID string, box []byte) []byte {
	return append([]byte(linkBoxLabel+grantID+"\x00"), box...)
}

// maxLinkBox bounds a link box's JSON, under the directory's cap on what
// an approval may carry: with the box in base64 inside and the signature,
// the padded plaintext stays in the 16 KiB bucket (directory.MaxSealedSeat).
const maxLinkBox = 8000

// maxLinkEpochs is how many sync key epochs a link box carries: the
// newest ones. A log batch sealed under an older epoch stays unread on
// the new device.
const maxLinkEpochs = 64

// approveLink approves the grant g for a linked device: a certificate of
// its keys, and the box of what it needs (see above).
func (s *Seat) approveLink(ctx context.Context, dc *DirectoryClient, userCode string, g PendingGrant) (DeviceApproval, error) {
	id, err := s.identityKey()
	if err != nil {
		return DeviceApproval{}, err
	}
	pub, err := ecdh.X25519().NewPublicKey(g.DeviceKey)
	if err != nil || len(g.SigningKey) != ed25519.PublicKeySize {
		return DeviceApproval{}, errors.New("seat: the directory gave a bad device key")
	}
	// The directory checks the certificate against the identities this
	// account registered: register it if it never was.
	if _, err := s.st.meta(ctx, "seat_credential"); err != nil {
		if _, err := s.Connect(ctx); err != nil && !errors.Is(err, ErrSeatExists) {
			return DeviceApproval{}, err
		}
	}
	serial := uint32(1)
	if v, err := s.st.meta(ctx, "cert_serial"); err == nil {
		n, _ := strconv.ParseUint(v, 10, 32)
		serial = uint32(n) + 1
	}
	if err := s.st.setMeta(ctx, "cert_serial", strconv.FormatUint(uint64(serial), 10)); err != nil {
		return DeviceApproval{}, err
	}
	cert, err := devcert.Issue(id.PrivateKey(), g.SigningKey, g.DeviceKey, serial, s.cfg.Now())
	if err != nil {
		return DeviceApproval{}, err
	}
	c := linkContent{Person: id.DID(), Cert: cert.Compact()}
	c.AccountID, _ = s.st.meta(ctx, "account_id")
	c.Org, _ = s.st.meta(ctx, "org")
	keys, err := s.syncKeys(ctx)
	if err != nil {
		return DeviceApproval{}, err
	}
	if len(keys) > maxLinkEpochs {
		keys = keys[len(keys)-maxLinkEpochs:]
	}
	for _, k := range keys {
		c.Keys = append(c.Keys, epochKey{Epoch: k.epoch, Key: k.raw})
	}
	rooms, err := s.Rooms(ctx)
	if err != nil {
		return DeviceApproval{}, err
	}
	left := 0
	for _, r := range rooms {
		c.Rooms = append(c.Rooms, boxRoom{Channel: r.Channel, Role: r.Role, Suite: uint16(r.Suite)})
		if b, _ := json.Marshal(c); len(b) > maxLinkBox {
			c.Rooms = c.Rooms[:len(c.Rooms)-1]
			left++
		}
	}
	box, err := json.Marshal(c)
	for _, k := range c.Keys {
		clear(k.Key)
	}
	if err != nil {
		return DeviceApproval{}, err
	}
	pt, err := json.Marshal(linkBox{Box: box, Sig: ed25519.Sign(id.PrivateKey(), linkBoxMessage(g.GrantID, box))})
	clear(box)
	if err != nil {
		return DeviceApproval{}, err
	}
	sealed, err := sealSeatBox(pub, g.GrantID, pt)
	clear(pt)
	if err != nil {
		return DeviceApproval{}, err
	}
	grant, device, err := dc.ApproveLinkGrant(ctx, userCode, sealed, cert.Compact())
	if err != nil {
		return DeviceApproval{}, err
	}
	return DeviceApproval{GrantID: grant, Label: g.Label, Fingerprint: linkFingerprint(g.DeviceKey, g.SigningKey),
		Linked: true, DeviceID: device, Rooms: len(c.Rooms), RoomsLeft: left}, nil
}

// ApproveLinkGrant approves a linked device's grant with its certificate
// and the sealed box; it returns the grant and the device's id.
func (c *DirectoryClient) ApproveLinkGrant(ctx context.Context, userCode string, sealedSeat, cert []byte) (string, string, error) {
	var out struct {
		GrantID string `json:"grant_id"`
		Device  string `json:"device"`
	}
	err := c.call(ctx, "POST", "/v1/device/grants/approve", map[string]any{"user_code": userCode, "sealed_seat": sealedSeat, "certificate": cert}, &out)
	return out.GrantID, out.Device, err
}
