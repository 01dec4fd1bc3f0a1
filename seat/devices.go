package seat

import (
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/padding"
)

// Device grants give a new device the account's credential without the
// directory ever holding it in the clear: the device makes a random X25519
// key, the directory shows a short user code, and a signed-in device
// approves that code. The directory seals a fresh API key to the device key.
//
// A seat does more than that: the approving seat also seals its own
// transport credential (the channel-scoped key from [Seat.Connect]) and the
// account's coordinates to the device key, in a box the directory stores
// and delivers but cannot open. A second home restored from the same phrase
// then has the same identity and sync channel, and can pull and push at
// once, without `connect` (which would be refused: the identity is taken)
// and without copying any file.
//
// Handing the transport credential to the approved device gives it nothing
// the account key it receives anyway could not obtain: the account owns the
// sync channel. The box only saves the new device a registration that the
// seat-uniqueness guard forbids.

// grantInfo is the HPKE info of the credential the directory seals to the
// device key (DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM).
const grantInfo = "skytale device grant v1"

// seatBoxInfo is the HPKE info prefix of the approver's box; the grant id
// follows it, so a box made for one grant does not open for another.
const seatBoxInfo = "skytale device seat v1 "

// sealSeatBox seals an approver's box to a device key. The box is padded
// to a bucket first (padding.Pad), so the directory, which holds it until
// the device polls, learns its size class and nothing finer, like every
// other payload a seat hands a server.
func sealSeatBox(pub *ecdh.PublicKey, grantID string, box []byte) ([]byte, error) {
	hk, err := hpke.NewDHKEMPublicKey(pub)
	if err != nil {
		return nil, err
	}
	pt := padding.Pad(box)
	defer clear(pt)
	return hpke.Seal(hk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte(seatBoxInfo+grantID), pt)
}

// openSeatBox opens what sealSeatBox sealed and returns the box without
// its padding.
func openSeatBox(hk hpke.PrivateKey, grantID string, sealed []byte) ([]byte, error) {
	pt, err := hpke.Open(hk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte(seatBoxInfo+grantID), sealed)
	if err != nil {
		return nil, err
	}
	box, err := padding.Unpad(pt)
	if err != nil {
		clear(pt)
		return nil, err
	}
	return box, nil
}

// recoverLabel starts what a restored home's identity signs in its grant.
const recoverLabel = "skytale recover v1\x00"

// DefaultDevicePoll is how often [Seat.WaitDevice] polls when the grant
// does not say otherwise.
const DefaultDevicePoll = time.Second

// GrantTicket is the directory's answer to a new device grant.
type GrantTicket struct {
	GrantID   string    `json:"grant_id"`
	UserCode  string    `json:"user_code"`
	PollToken string    `json:"poll_token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PendingGrant describes a pending grant to the device about to approve it.
type PendingGrant struct {
	GrantID   string `json:"grant_id"`
	DeviceKey []byte `json:"device_key"`
	// SigningKey is set for a device asking to be linked ([Seat.RequestLink]).
	SigningKey []byte    `json:"signing_key"`
	Label      string    `json:"label"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// GrantPoll is one answer to a device's poll. The sealed fields, AccountID
// and Org come exactly once, after approval.
type GrantPoll struct {
	Status           string `json:"status"` // pending, approved or expired
	SealedCredential []byte `json:"sealed_credential"`
	SealedSeat       []byte `json:"sealed_seat"`
	AccountID        string `json:"account_id"`
	Org              string `json:"org"`
}

// CreateDeviceGrant asks for a credential for the X25519 public key
// deviceKey (no credential needed).
func (c *DirectoryClient) CreateDeviceGrant(ctx context.Context, deviceKey []byte, label string) (GrantTicket, error) {
	var t GrantTicket
	err := c.call(ctx, "POST", "/v1/device/grants", map[string]any{"device_key": deviceKey, "label": label}, &t)
	return t, err
}

// LookupDeviceGrant returns the pending grant with userCode.
func (c *DirectoryClient) LookupDeviceGrant(ctx context.Context, userCode string) (PendingGrant, error) {
	var g PendingGrant
	err := c.call(ctx, "POST", "/v1/device/grants/lookup", map[string]string{"user_code": userCode}, &g)
	return g, err
}

// ApproveDeviceGrant approves the grant with userCode. sealedSeat, if not
// nil, is delivered to the device with its credential.
func (c *DirectoryClient) ApproveDeviceGrant(ctx context.Context, userCode string, sealedSeat []byte) (string, error) {
	in := map[string]any{"user_code": userCode}
	if sealedSeat != nil {
		in["sealed_seat"] = sealedSeat
	}
	var out struct {
		GrantID string `json:"grant_id"`
	}
	err := c.call(ctx, "POST", "/v1/device/grants/approve", in, &out)
	return out.GrantID, err
}

// PollDeviceGrant polls a grant with its poll token (not Credential).
func (c *DirectoryClient) PollDeviceGrant(ctx context.Context, grantID, pollToken string) (GrantPoll, error) {
	var p GrantPoll
	u := strings.TrimRight(c.BaseURL, "/") + "/v1/device/grants/" + url.PathEscape(grantID)
	err := doJSON(ctx, c.HTTP, "GET", u, pollToken, nil, &p)
	return p, err
}

// DeviceGrant is this device's pending request for a credential. Its
// private key lives only in memory: an interrupted wait starts over.
type DeviceGrant struct {
	GrantTicket
	// Fingerprint is a short digest of the device key, for the person to
	// compare with what the approving device shows.
	Fingerprint string
	// PollInterval is the time between polls; zero means DefaultDevicePoll.
	PollInterval time.Duration

	key *ecdh.PrivateKey
}

// DeviceResult is what a new device received.
type DeviceResult struct {
	AccountID string
	Org       string
	// Connected says the approving seat handed over its transport
	// credential for this seat's sync channel, so no `connect` is needed.
	Connected bool
	// Offered lists the rooms this device offered itself to
	// (devicerooms.go); it joins each once a member added it
	// ([Seat.JoinDeviceRooms]). OfferErr says why others were not.
	Offered  []string
	OfferErr error
}

// DeviceApproval is what the approving device did.
type DeviceApproval struct {
	GrantID     string
	Label       string
	Fingerprint string
	// SharedSeat says the seat's transport credential went along.
	SharedSeat bool
	// Linked says the device was linked (it holds no phrase): it got a
	// certificate of its keys, and DeviceID is its id.
	Linked   bool
	DeviceID string
	// Rooms is how many rooms the box listed for the device to offer
	// itself to, and RoomsLeft how many did not fit.
	Rooms, RoomsLeft int
}

// seatBox is the approver's plaintext, sealed to the device key.
type seatBox struct {
	AccountID  string `json:"account_id"`
	Org        string `json:"org"`
	Channel    string `json:"channel,omitempty"`
	SeatID     string `json:"seat_id,omitempty"`
	Credential string `json:"credential,omitempty"`
	// Rooms are the approver's rooms, which the new device offers itself
	// to (devicerooms.go).
	Rooms []boxRoom `json:"rooms,omitempty"`
}

func fingerprint(deviceKey []byte) string {
	h := sha256.Sum256(deviceKey)
	x := hex.EncodeToString(h[:6])
	return x[:4] + " " + x[4:8] + " " + x[8:]
}

// Recover installs phrase in this home, or, if the home already holds a
// seed, checks that it is the same one (so an interrupted recovery can be
// run again). It returns the identity.
func (s *Seat) Recover(ctx context.Context, phrase string) (string, error) {
	did, err := s.Restore(ctx, phrase)
	if !errors.Is(err, ErrSeedExists) {
		return did, err
	}
	p, perr := ParsePhrase(phrase)
	if perr != nil {
		return "", perr
	}
	have, _ := s.Identity()
	if p.Seed().Identity().DID() != have {
		return "", ErrSeedExists
	}
	return have, nil
}

// RequestDevice starts a device grant: a fresh X25519 device key, and a
// user code to approve on a signed-in device with [Seat.ApproveDevice].
func (s *Seat) RequestDevice(ctx context.Context, label string) (*DeviceGrant, error) {
	if s.cfg.APIURL == "" {
		return nil, ErrNoDirectoryURL
	}
	if s.IsLinked() {
		return nil, ErrLinkedHome
	}
	if _, err := s.getSeed(); err != nil {
		return nil, err
	}
	if _, err := s.apiKey(ctx); err == nil {
		return nil, ErrSignedIn
	}
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	pub := key.PublicKey().Bytes()
	// The grant carries the identity's proof that this home holds the
	// phrase, so that a linked device may approve it (a recovery).
	seed, _ := s.getSeed()
	id := seed.Identity()
	proof := ed25519.Sign(id.PrivateKey(), append([]byte(recoverLabel), pub...))
	var t GrantTicket
	err = s.directory("").call(ctx, "POST", "/v1/device/grants", map[string]any{"device_key": pub, "label": label,
		"identity": id.DID(), "proof": proof}, &t)
	if err != nil {
		return nil, err
	}
	return &DeviceGrant{GrantTicket: t, Fingerprint: fingerprint(pub), key: key}, nil
}

// WaitDevice polls until g is approved, then opens and keeps the account
// credential and, when the approving seat sent it for this seat's sync
// channel, the transport credential. Failures that may pass (network
// errors, 5xx answers) are retried at the next poll. It returns when ctx is
// done, with ctx's error.
func (s *Seat) WaitDevice(ctx context.Context, g *DeviceGrant) (DeviceResult, error) {
	p, err := s.pollApproved(ctx, g.GrantID, g.PollToken, g.PollInterval)
	if err != nil {
		return DeviceResult{}, err
	}
	return s.finishDevice(ctx, g, p)
}

// pollApproved polls the device grant id every interval (DefaultDevicePoll
// when zero) until it is approved, and returns the approved poll. Failures
// that may pass (network errors, 5xx answers) are retried at the next
// poll; a 4xx answer, an expired grant, one collected before (not by us)
// and the end of ctx end it.
func (s *Seat) pollApproved(ctx context.Context, id, token string, interval time.Duration) (GrantPoll, error) {
	every := interval
	if every <= 0 {
		every = DefaultDevicePoll
	}
	dc := s.directory("")
	for {
		p, err := dc.PollDeviceGrant(ctx, id, token)
		var apiErr *APIError
		switch {
		case ctx.Err() != nil:
			return GrantPoll{}, ctx.Err()
		case errors.As(err, &apiErr) && apiErr.Status/100 == 4:
			return GrantPoll{}, err
		case err != nil:
			// The network or the directory failed for now: a wait of
			// minutes should outlast that, so poll again.
			p.Status = ""
		}
		switch p.Status {
		case "expired":
			return GrantPoll{}, ErrGrantExpired
		case "approved":
			if p.SealedCredential == nil {
				return GrantPoll{}, errors.New("seat: the device grant was already collected")
			}
			return p, nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return GrantPoll{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (s *Seat) finishDevice(ctx context.Context, g *DeviceGrant, p GrantPoll) (DeviceResult, error) {
	hk, err := hpke.NewDHKEMPrivateKey(g.key)
	if err != nil {
		return DeviceResult{}, err
	}
	open := func(info string, ct []byte) ([]byte, error) {
		return hpke.Open(hk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte(info), ct)
	}
	cred, err := open(grantInfo, p.SealedCredential)
	if err != nil {
		return DeviceResult{}, errors.New("seat: the delivered credential does not open with this device key")
	}
	apiKey := string(cred)
	res := DeviceResult{AccountID: p.AccountID, Org: p.Org}
	var box seatBox
	if p.SealedSeat != nil {
		pt, err := openSeatBox(hk, g.GrantID, p.SealedSeat)
		if err == nil && json.Unmarshal(pt, &box) == nil {
			if res.AccountID == "" {
				res.AccountID, res.Org = box.AccountID, box.Org
			}
		} else {
			box = seatBox{} // not ours to read: go on with the account key alone
		}
		clear(pt)
	}
	if res.Org == "" {
		return DeviceResult{}, errors.New("seat: the directory did not say which org the credential is for")
	}
	// Keep the transport credential only if it is for our own sync channel
	// (the approver was restored from the same phrase) in the same org.
	// The box is HPKE base mode: anyone who knows the device key could have
	// sealed it, so it is trusted no further than that check. The account
	// and the credential are stored in one transaction: the box is
	// delivered only once.
	kv := []string{"account_id", res.AccountID, "org", res.Org, "api_key", apiKey}
	seed, err := s.getSeed()
	if err != nil {
		return DeviceResult{}, err
	}
	// As SyncChannel names it, for the org we are about to store.
	own := fmt.Sprintf("%s/tally/%x", res.Org, []byte(seed.Identity().PublicKey()))
	if box.Credential != "" && box.Org == res.Org && box.Channel == own {
		kv = append(kv, "seat_id", box.SeatID, "seat_credential", box.Credential)
		res.Connected = true
	}
	if err := s.st.setMeta(ctx, kv...); err != nil {
		return DeviceResult{}, err
	}
	// The rooms to offer this device to, from a box for this account. (A
	// forged list could only make this device offer itself to rooms of
	// its own account, where nobody adds a device of a person who is not
	// in the room.)
	if box.AccountID == res.AccountID && box.Org == res.Org {
		res.Offered, res.OfferErr = s.offerDeviceRooms(ctx, box.Rooms)
	}
	s.Restock(ctx) // this device's own join offers (stock.go)
	return res, nil
}

// PendingDevice is a device waiting for approval, as the approver sees it
// before approving.
type PendingDevice struct {
	Label string
	// Fingerprint is the digest of the device key the directory holds for
	// the grant; the new device shows the digest of the key it made.
	// They match unless someone else's key stands behind the user code.
	Fingerprint string
	// Link says the device asks to be linked (it holds no phrase).
	Link bool
}

// PendingDevice looks up the device grant with userCode, so the person can
// compare its fingerprint with the one the new device shows before
// approving.
func (s *Seat) PendingDevice(ctx context.Context, userCode string) (PendingDevice, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return PendingDevice{}, err
	}
	g, err := s.directory(key).LookupDeviceGrant(ctx, userCode)
	if err != nil {
		return PendingDevice{}, err
	}
	if g.SigningKey != nil {
		return PendingDevice{Label: g.Label, Fingerprint: linkFingerprint(g.DeviceKey, g.SigningKey), Link: true}, nil
	}
	return PendingDevice{Label: g.Label, Fingerprint: fingerprint(g.DeviceKey)}, nil
}

// sameFingerprint compares fingerprints as people type them: case and
// spaces do not matter.
func sameFingerprint(a, b string) bool {
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), "")) }
	return norm(a) != "" && norm(a) == norm(b)
}

// ApproveDevice approves the device grant with userCode for this seat's
// account, and seals the seat's transport credential to the device. The
// fingerprint is the one the new device shows (see [Seat.PendingDevice]);
// if it is not the fingerprint of the key behind the user code, nothing is
// approved and the error is [ErrFingerprintMismatch].
func (s *Seat) ApproveDevice(ctx context.Context, userCode, fingerprintShown string) (DeviceApproval, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return DeviceApproval{}, err
	}
	dc := s.directory(key)
	g, err := dc.LookupDeviceGrant(ctx, userCode)
	if err != nil {
		return DeviceApproval{}, err
	}
	if g.SigningKey != nil {
		if !sameFingerprint(linkFingerprint(g.DeviceKey, g.SigningKey), fingerprintShown) {
			return DeviceApproval{}, ErrFingerprintMismatch
		}
		return s.approveLink(ctx, dc, userCode, g)
	}
	if !sameFingerprint(fingerprint(g.DeviceKey), fingerprintShown) {
		return DeviceApproval{}, ErrFingerprintMismatch
	}
	pub, err := ecdh.X25519().NewPublicKey(g.DeviceKey)
	if err != nil {
		return DeviceApproval{}, fmt.Errorf("seat: the directory gave a bad device key: %w", err)
	}
	box := seatBox{}
	box.AccountID, _ = s.st.meta(ctx, "account_id")
	box.Org, _ = s.st.meta(ctx, "org")
	if cred, err := s.st.meta(ctx, "seat_credential"); err == nil {
		box.Credential = cred
		box.SeatID, _ = s.st.meta(ctx, "seat_id")
		box.Channel, _ = s.SyncChannel(ctx)
	}
	left, err := s.boxRooms(ctx, &box)
	if err != nil {
		return DeviceApproval{}, err
	}
	pt, err := json.Marshal(box)
	if err != nil {
		return DeviceApproval{}, err
	}
	sealed, err := sealSeatBox(pub, g.GrantID, pt)
	clear(pt)
	if err != nil {
		return DeviceApproval{}, err
	}
	id, err := dc.ApproveDeviceGrant(ctx, userCode, sealed)
	if err != nil {
		return DeviceApproval{}, err
	}
	return DeviceApproval{GrantID: id, Label: g.Label, Fingerprint: fingerprint(g.DeviceKey), SharedSeat: box.Credential != "",
		Rooms: len(box.Rooms), RoomsLeft: left}, nil
}
