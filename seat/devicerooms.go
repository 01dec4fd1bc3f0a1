package seat

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/padding"
)

// Every device of a person in every room of the person.
//
// A home restored from the phrase ([Seat.Restore], [Seat.Recover]) signs
// its leaves with a device key of its own, which the person's key vouches
// for (memberid.go): a second device is a second member of each room, not a
// copy of the first (the engine refuses one credential in two leaves), and
// shows as the same person. A home made by [Seat.Init] signs with the
// person's key, as before.
//
// When a device is approved ([Seat.ApproveDevice]), the approving device
// lists its rooms in the box it seals to the new device. The new device
// offers itself to each of them: a device offer on the room's channel
// (deviceOfferMagic, then a KeyPackage of the room's suite for its device
// identity, padded to a bucket), which its account, the person's, may publish there. The first
// member to see the offer that may add it (another device of the same
// person, usually the approving one, or the room's owner or an admin) adds
// it, if its person is in the room already, and publishes the Welcome on
// the room's channel, where the new device finds it ([Seat.JoinDeviceRooms]).
// An offer for anyone not in the room is ignored, so offers bring nobody
// new in. The approving device's box is sealed to the new device; the
// offers, like the KeyPackages of join requests, show the relay the
// identity they are for.
//
// Why the other devices add the new one, and not the new one itself by an
// external commit: it needs no GroupInfo kept current anywhere and no
// policy for outsiders (the engine refuses external commits, policy.go),
// and every member checks the add like any other (roles.go lets a person
// add and remove its own devices).

// deviceOfferMagic starts a device offer. The offer on the wire is padded
// like every payload (padding.Pad of the magic and the KeyPackage), so its
// length is a bucket's, not the KeyPackage's; see [encodeDeviceOffer].
const deviceOfferMagic = "SKD1"

// encodeDeviceOffer is the payload that offers KeyPackage kp.
func encodeDeviceOffer(kp []byte) []byte {
	return padding.Pad(append([]byte(deviceOfferMagic), kp...))
}

// decodeDeviceOffer returns the KeyPackage of a device offer, and whether p is
// one: a padded block holding the magic and the KeyPackage, or (from a
// seat before offers were padded, while such entries stay in the archive)
// the magic and the KeyPackage bare.
func decodeDeviceOffer(p []byte) ([]byte, bool) {
	if kp, ok := bytes.CutPrefix(p, []byte(deviceOfferMagic)); ok {
		return kp, true
	}
	// Check the prefix before unpadding: most entries are not offers.
	if len(p) < padding.HeaderLen+len(deviceOfferMagic) || string(p[padding.HeaderLen:padding.HeaderLen+len(deviceOfferMagic)]) != deviceOfferMagic {
		return nil, false
	}
	b, err := padding.Unpad(p)
	if err != nil {
		return nil, false
	}
	return bytes.CutPrefix(b, []byte(deviceOfferMagic))
}

// sealedDeviceKey is the sealed kind of the home's device key.
const sealedDeviceKey = "device key"

// maxBoxRooms bounds the rooms listed in an approval box, which the
// directory caps at 4 KiB.
const maxBoxBytes = 3900

// boxRoom is one room in an approval box.
type boxRoom struct {
	Channel string `json:"c"`
	Role    string `json:"r"`
	Suite   uint16 `json:"s"`
}

// makeDeviceKey gives the home a device key of its own, once.
func (s *Seat) makeDeviceKey(ctx context.Context) error {
	if _, err := s.st.meta(ctx, "device_key"); err == nil {
		return nil
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	l, err := s.sealer()
	if err != nil {
		return err
	}
	sealed := l.seal(sealedDeviceKey, "device", priv.Seed())
	clear(priv)
	return s.st.setMeta(ctx, "device_key", hex.EncodeToString(sealed))
}

// memberKey returns the key this home signs its leaves with and the member
// identity that names the leaves.
func (s *Seat) memberKey(ctx context.Context) (sig []byte, identity string, err error) {
	if s.IsLinked() {
		// A linked device: its certificate is in its identity (link.go).
		id, err := s.st.meta(ctx, "member_identity")
		if errors.Is(err, errNoValue) {
			return nil, "", ErrNotSignedIn
		}
		if err != nil {
			return nil, "", err
		}
		k, err := s.deviceSigningKey(ctx)
		if err != nil {
			return nil, "", err
		}
		return k.Seed(), id, nil
	}
	seed, err := s.getSeed()
	if err != nil {
		return nil, "", err
	}
	person := seed.Identity()
	v, err := s.st.meta(ctx, "device_key")
	if errors.Is(err, errNoValue) {
		return person.PrivateKey().Seed(), person.DID(), nil
	}
	if err != nil {
		return nil, "", err
	}
	sealed, err := hex.DecodeString(v)
	if err != nil {
		return nil, "", fmt.Errorf("seat: the stored device key is damaged")
	}
	l, err := s.sealer()
	if err != nil {
		return nil, "", err
	}
	if sig, err = l.open(sealedDeviceKey, "device", sealed); err != nil || len(sig) != ed25519.SeedSize {
		return nil, "", fmt.Errorf("seat: the stored device key does not open")
	}
	pub := ed25519.NewKeyFromSeed(sig).Public().(ed25519.PublicKey)
	return sig, DeviceIdentity(person, pub), nil
}

// boxRooms lists this home's active rooms for an approval box, as many as
// fit; it returns how many did not.
func (s *Seat) boxRooms(ctx context.Context, box *seatBox) (left int, err error) {
	rooms, err := s.Rooms(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range rooms {
		box.Rooms = append(box.Rooms, boxRoom{Channel: r.Channel, Role: r.Role, Suite: uint16(r.Suite)})
		if b, _ := json.Marshal(box); len(b) > maxBoxBytes {
			box.Rooms = box.Rooms[:len(box.Rooms)-1]
			left++
		}
	}
	return left, nil
}

// offerDeviceRooms offers this device to each of rooms, and returns the
// channels offered and what failed (joined, one error per room).
func (s *Seat) offerDeviceRooms(ctx context.Context, rooms []boxRoom) ([]string, error) {
	var offered []string
	var errs []error
	for _, br := range rooms {
		if err := s.offerDevice(ctx, br); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", br.Channel, err))
			continue
		}
		offered = append(offered, br.Channel)
	}
	return offered, errors.Join(errs...)
}

// offerDevice offers this device to the room on channel ch (see above).
func (s *Seat) offerDevice(ctx context.Context, br boxRoom) error {
	if err := channel.Valid(br.Channel); err != nil || (br.Role != "owner" && br.Role != "member") {
		return fmt.Errorf("seat: a room in the approval box is not one: %q", br.Channel)
	}
	cs := mls.CipherSuite(br.Suite)
	if err := checkRoomSuite(cs); err != nil {
		return err
	}
	if _, err := s.loadRoom(ctx, br.Channel); err == nil {
		return nil // in the room already
	}
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return err
	}
	b, err := mls.NewKeyPackage(cs, id, sig, s.mlsConfig())
	if err != nil {
		return err
	}
	conn, err := s.roomPublisher(ctx, br.Channel)
	if err != nil {
		return err
	}
	defer conn.Close()
	seq, err := conn.Publish(ctx, br.Channel, encodeDeviceOffer(b.Bytes()))
	if err != nil {
		return err
	}
	priv, err := encodeBundles([]*mls.KeyPackageBundle{b})
	if err != nil {
		return err
	}
	l, err := s.sealer()
	if err != nil {
		return err
	}
	// The Welcome comes after the offer: look from the offer's seq on.
	reqID := deviceRequestID(seq, br.Role, br.Channel)
	_, err = s.st.db.ExecContext(ctx, `INSERT INTO key_packages(request_id, channel, private, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (request_id) DO NOTHING`, reqID, br.Channel, l.seal(sealedKeyPackage, reqID, priv), s.cfg.Now().UnixMilli())
	clear(priv)
	return err
}

// A pending device join is a key_packages row whose request id is
// "device:<seq>:<role>:<channel>": the seq of the offer in the room's
// channel and the role of the room.
func deviceRequestID(seq uint64, role, ch string) string {
	return "device:" + strconv.FormatUint(seq, 10) + ":" + role + ":" + ch
}

func parseDeviceRequestID(id string) (seq uint64, role string, ok bool) {
	rest, ok := strings.CutPrefix(id, "device:")
	if !ok {
		return 0, "", false
	}
	n, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, "", false
	}
	role, _, ok = strings.Cut(rest, ":")
	if !ok {
		return 0, "", false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return seq, role, err == nil
}

// JoinDeviceRooms joins the rooms this device offered itself to (see
// above) whose Welcome has come, and returns their channels. The others
// wait for the next call.
func (s *Seat) JoinDeviceRooms(ctx context.Context) ([]string, error) {
	rows, err := s.st.db.QueryContext(ctx, `SELECT request_id, channel FROM key_packages WHERE request_id LIKE 'device:%'`)
	if err != nil {
		return nil, err
	}
	type pending struct{ id, ch string }
	var ps []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.id, &p.ch); err != nil {
			rows.Close()
			return nil, err
		}
		ps = append(ps, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ps) == 0 {
		return nil, err
	}
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return nil, err
	}
	s.lockRooms()
	defer s.unlockRooms()
	var joined []string
	for _, p := range ps {
		ok, err := s.joinDeviceRoom(ctx, rc, p.id, p.ch)
		if err != nil {
			return joined, fmt.Errorf("seat: joining %s as this device: %w", p.ch, err)
		}
		if ok {
			joined = append(joined, p.ch)
		}
	}
	return joined, nil
}

var errWelcomeFound = errors.New("seat: welcome found")

// joinDeviceRoom joins ch from the Welcome for the pending device join
// reqID, if it has come; the caller holds the room lock.
func (s *Seat) joinDeviceRoom(ctx context.Context, rc *RelayClient, reqID, ch string) (bool, error) {
	since, role, ok := parseDeviceRequestID(reqID)
	if !ok {
		return false, fmt.Errorf("seat: a damaged device join record %q", reqID)
	}
	var priv []byte
	if err := s.st.db.QueryRowContext(ctx, `SELECT private FROM key_packages WHERE request_id = ?`, reqID).Scan(&priv); err != nil {
		return false, err
	}
	l, err := s.sealer()
	if err != nil {
		return false, err
	}
	if priv, err = l.open(sealedKeyPackage, reqID, priv); err != nil {
		return false, err
	}
	bundles, err := decodeBundles(priv)
	clear(priv)
	if err != nil {
		return false, err
	}
	var g *mls.Group
	_, err = rc.SyncAll(ctx, ch, since, func(e RelayEntry) error {
		if e.EntryType != EntryWelcome {
			return nil
		}
		joined, err := s.joinWelcome(ctx, ch, e.Payload, bundles[0])
		if treeTrouble(err) {
			return err // ours, but its tree is not to be had yet
		}
		if err != nil {
			return nil // another joiner's Welcome
		}
		g = joined
		return errWelcomeFound
	})
	if err != nil && !errors.Is(err, errWelcomeFound) {
		return false, err
	}
	if g == nil {
		return false, nil
	}
	// The room's log after the Welcome is what this device reads; what
	// came before is not its to read. The cursor starts where the Welcome
	// was found, and the next catch-up applies the rest.
	r := &room{channel: ch, role: role, g: g, lastSeq: since}
	if err := s.saveRoom(ctx, r, true); err != nil {
		return false, err
	}
	// The KeyPackage's private keys are spent (RFC 9420 §16.8).
	_, err = s.st.db.ExecContext(ctx, `DELETE FROM key_packages WHERE request_id = ?`, reqID)
	return true, err
}

// noteOffer reads a device offer from a room entry, if it is one.
func noteOffer(r *room, e RelayEntry) bool {
	if e.EntryType != EntryApp {
		return false
	}
	kp, ok := decodeDeviceOffer(e.Payload)
	if !ok {
		return false
	}
	if len(r.offers) < maxOffersPerCatchUp {
		r.offers = append(r.offers, kp)
	}
	return true
}

// maxOffersPerCatchUp bounds the offers one catch-up keeps to add.
const maxOffersPerCatchUp = 16

// addOffers adds the device offers r saw, when this member may: it is
// another device of the offer's person, or manages the room. Only devices
// of persons in the room already are added; any other offer is dropped.
func (s *Seat) addOffers(ctx context.Context, r *room) error {
	offers := r.offers
	r.offers = nil
	for _, kp := range offers {
		if s.offerRevoked(ctx, [][]byte{kp}) {
			continue // a revoked device is never added back
		}
		persons := map[string]bool{}
		identities := map[string]bool{}
		for _, m := range r.g.Members() {
			persons[PersonOf(m.Identity)] = true
			identities[m.Identity] = true
		}
		self := PersonOf(selfIdentity(r.g))
		check := func(id string) error {
			switch {
			case !isDeviceIdentity(id) || identities[id]:
				return errors.New("seat: a device offer is for a new device")
			case !persons[PersonOf(id)]:
				return errors.New("seat: a device offer is for a person in the room")
			case PersonOf(id) != self && !r.manages():
				return ErrNotAdmin
			}
			return nil
		}
		res, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
			// Only while this member builds its own Commit: the commits it
			// receives meanwhile (a stale retry catches up) are not its.
			s.addCheck = check
			defer func() { s.addCheck = nil }()
			return addMembers(r, kp)
		})
		if err != nil {
			if errors.Is(err, ErrFenceAhead) || errors.Is(err, errStaleRetries) || ctx.Err() != nil {
				return err
			}
			continue // not an offer this member adds (or added already)
		}
		conn, err := s.roomPub(ctx, r.channel)
		if err != nil {
			return err
		}
		_, err = conn.Publish(ctx, r.channel, res.Welcome)
		conn.Close()
		if err != nil {
			return fmt.Errorf("seat: the device is in %s, but its Welcome could not be published: %w", r.channel, err)
		}
	}
	return nil
}

// Device is one device of this person, as this home's rooms show it.
type Device struct {
	// ID names the device: the last 8 characters of its member identity.
	ID string
	// Identity is its member identity (memberid.go).
	Identity string
	// This is set for this home's own device.
	This bool
	// Rooms lists the channels of this home's rooms it is in.
	Rooms []string
}

// DeviceID is the short name of the device whose member identity is id.
func DeviceID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return id[len(id)-8:]
}

// Devices lists this person's devices in this home's rooms.
func (s *Seat) Devices(ctx context.Context) ([]Device, error) {
	_, self, err := s.memberKey(ctx)
	if err != nil {
		return nil, err
	}
	person := PersonOf(self)
	byID := map[string]*Device{}
	var order []string
	err = s.eachRoom(ctx, func(r *room) error {
		for _, m := range r.g.Members() {
			if PersonOf(m.Identity) != person {
				continue
			}
			d := byID[m.Identity]
			if d == nil {
				d = &Device{ID: DeviceID(m.Identity), Identity: m.Identity, This: m.Identity == self}
				byID[m.Identity] = d
				order = append(order, m.Identity)
			}
			d.Rooms = append(d.Rooms, r.channel)
		}
		return nil
	})
	out := make([]Device, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, err
}

// RevokeDevice removes the device with the ID from every room of this
// home it is in, and returns those rooms. The device can read nothing of
// those rooms that is sent after the removal; its account is the person's,
// so the relay still carries the rooms' ciphertext to it.
//
// It is [Seat.Revoke] (revocation.go), which also ends a linked device's
// credentials and moves the sync key on; it needs the identity.
func (s *Seat) RevokeDevice(ctx context.Context, id string) ([]string, error) {
	r, err := s.Revoke(ctx, id)
	return r.Rooms, err
}

// eachRoom runs f on every active room of this home, caught up.
func (s *Seat) eachRoom(ctx context.Context, f func(*room) error) error {
	rooms, err := s.Rooms(ctx)
	if err != nil {
		return err
	}
	for _, ri := range rooms {
		err := s.withRoom(ctx, ri.Channel, func(r *room) error {
			if err := s.catchUpSettled(ctx, r, nil); err != nil {
				return err
			}
			if !r.g.Active() {
				return nil
			}
			return f(r)
		})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	return nil
}

// joinPendingDevice joins ch if this device offered itself to it and its
// Welcome has come; the caller holds the room lock.
func (s *Seat) joinPendingDevice(ctx context.Context, ch string) bool {
	var reqID string
	if s.st.db.QueryRowContext(ctx, `SELECT request_id FROM key_packages WHERE channel = ? AND request_id LIKE 'device:%'`, ch).Scan(&reqID) != nil {
		return false
	}
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return false
	}
	ok, _ := s.joinDeviceRoom(ctx, rc, reqID, ch)
	return ok
}
