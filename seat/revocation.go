package seat

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/internal/devcert"
	"github.com/skytale-oss/skytale/mls"
)

// Revocation that lasts.
//
// [Seat.RevokeDevice], on a device that holds the identity, signs a
// revocation of the device's signing key (internal/devcert) and gives it
// to the directory, which ends the device's API key and tokens on both
// planes at once and keeps the revocation for everyone to fetch; moves
// the sync key to a new epoch that the revoked device is not given
// (synckeys.go); and removes the device's leaves from every room of this
// home, one Commit per room.
//
// The rule every member's seat keeps: a leaf whose signature key is named
// by a revocation of its person that this seat has seen is refused, in
// any Add and as any Commit's committer, whatever its certificate's serial
// or issue time, for good (the seat keeps every revocation it saw, even
// if the directory later forgets it). A revocation names a key, not a
// certificate, so certificates older than the newest revocation stay
// good unless they are for a revoked key, and no identity holder issues a
// certificate for a key the directory lists as revoked (the directory
// refuses the approval). A member learns a person's revocations from the
// directory before it adds a device of that person (a device offer, or
// the offers of [Room.Add]); a Commit by someone else that adds a
// device revoked in a revocation it has not fetched yet is refused by
// every member that has.

// RevokedDevice is what [Seat.Revoke] did.
type RevokedDevice struct {
	// Device is the id revoked.
	Device string
	// Directory says the directory took the revocation (it had the
	// device, or keeps the revocation of its key for the rooms).
	Directory bool
	// Linked says the device was a linked device of this account: its
	// API key is ended, and Epoch is the sync key epoch it was not given,
	// which Given remaining linked devices were.
	Linked bool
	Epoch  uint32
	Given  int
	// Rooms are the rooms of this home it was removed from.
	Rooms []string
}

// LinkedDevice is one device of the account as the directory lists it.
type LinkedDevice struct {
	ID         string    `json:"id"`
	Label      string    `json:"label"`
	Identity   string    `json:"identity"`
	SigningKey []byte    `json:"signing_key"`
	LinkedAt   time.Time `json:"linked_at"`
	LastSeen   time.Time `json:"last_seen"`
	RevokedAt  time.Time `json:"revoked_at"`
	This       bool      `json:"this"`
}

// certificate checks that d's identity carries person's certificate of
// its signing key.
func (d LinkedDevice) certificate(person ed25519.PublicKey) (devcert.Cert, error) {
	did, compact, ok := devcert.SplitIdentity(d.Identity)
	if !ok || did != DIDKey(person) {
		return devcert.Cert{}, devcert.ErrInvalid
	}
	return devcert.Parse(person, d.SigningKey, compact)
}

// LinkedDevices lists the account's linked devices.
func (c *DirectoryClient) LinkedDevices(ctx context.Context) ([]LinkedDevice, error) {
	var out struct {
		Devices []LinkedDevice `json:"devices"`
	}
	err := c.call(ctx, "GET", "/v1/devices", nil, &out)
	return out.Devices, err
}

// PublishRevocation gives the directory a device revocation; it returns
// the id of the linked device it ended, if any.
func (c *DirectoryClient) PublishRevocation(ctx context.Context, revocation []byte) (string, error) {
	var out struct {
		Device string `json:"device"`
	}
	err := c.call(ctx, "POST", "/v1/devices/revocations", map[string]any{"revocation": revocation}, &out)
	return out.Device, err
}

// Revocations returns the device revocations the person did signed, as
// the directory keeps them (unchecked).
func (c *DirectoryClient) Revocations(ctx context.Context, did string) ([][]byte, error) {
	var out struct {
		Revocations [][]byte `json:"revocations"`
	}
	err := c.call(ctx, "GET", "/v1/devices/revocations?identity="+url.QueryEscape(did), nil, &out)
	return out.Revocations, err
}

// revokedMeta is the meta key of a revoked signing key.
func revokedMeta(key []byte) string { return "revoked:" + hex.EncodeToString(key) }

// loadRevoked fills the in-memory set of revoked keys once.
func (s *Seat) loadRevoked(ctx context.Context) {
	s.mu.Lock()
	loaded := s.revoked != nil
	s.mu.Unlock()
	if loaded {
		return
	}
	set := map[string]time.Time{}
	rows, err := s.st.db.QueryContext(ctx, `SELECT key, value FROM meta WHERE key LIKE 'revoked:%'`)
	if err != nil {
		return
	}
	for rows.Next() {
		var k, v string
		if rows.Scan(&k, &v) != nil {
			continue
		}
		b, err := hex.DecodeString(v)
		if err != nil {
			continue
		}
		if r, err := devcert.ParseRevocation(b); err == nil {
			set[strings.TrimPrefix(k, "revoked:")] = r.RevokedAt
		}
	}
	rows.Close()
	if rows.Err() != nil {
		return
	}
	s.mu.Lock()
	if s.revoked == nil {
		s.revoked = set
	}
	s.mu.Unlock()
}

// isRevokedKey reports whether this seat has seen a revocation of the
// signing key.
func (s *Seat) isRevokedKey(key []byte) bool {
	_, ok := s.revokedAt(key)
	return ok
}

// revokedAt is when the signing key was revoked, if this seat saw it.
func (s *Seat) revokedAt(key []byte) (time.Time, bool) {
	s.loadRevoked(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.revoked[hex.EncodeToString(key)]
	return at, ok
}

// revokedBy reports whether key was revoked at or before at: a Commit
// the relay archived before the revocation was the person's to make.
// The relay keeps entry times coarse (relay.Config.TimeGranularity, at
// most revocationGrain), so an entry of the grain the revocation fell in
// counts as after it: every member decides alike from the same times.
func (s *Seat) revokedBy(key []byte, at time.Time) bool {
	r, ok := s.revokedAt(key)
	return ok && !at.Before(r.Truncate(revocationGrain))
}

// revocationGrain is the coarsest entry time a relay keeps
// (relay.MaxTimeGranularity). A Commit the relay archived in the same
// second as the revocation, before it, is refused too: all members
// alike, so the room's owner resets the fence past it.
const revocationGrain = time.Second

// keepRevocation records a checked revocation for good.
func (s *Seat) keepRevocation(ctx context.Context, r devcert.Revocation) error {
	s.loadRevoked(ctx)
	if err := s.st.setMeta(ctx, revokedMeta(r.SigningKey), hex.EncodeToString(r.Bytes())); err != nil {
		return err
	}
	s.mu.Lock()
	if s.revoked == nil {
		s.revoked = map[string]time.Time{}
	}
	s.revoked[hex.EncodeToString(r.SigningKey)] = r.RevokedAt
	s.mu.Unlock()
	return nil
}

// noteRevocations fetches the revocations of the person did from the
// directory and keeps those the person signed. A directory that cannot
// answer leaves what this seat knew.
func (s *Seat) noteRevocations(ctx context.Context, did string) error {
	pub, err := ParseDIDKey(did)
	if err != nil {
		return nil
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	list, err := s.directory(key).Revocations(ctx, did)
	if err != nil {
		return revokedOr(err)
	}
	for _, b := range list {
		r, err := devcert.ParseRevocation(b)
		if err != nil || !bytes.Equal(r.Person, pub) || s.isRevokedKey(r.SigningKey) {
			continue
		}
		if err := s.keepRevocation(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// revocationsFresh is how long a person's revocations fetched for a
// Commit's check are used before they are fetched again: long enough for
// the checks of one Commit, short enough that a revocation is seen by the
// next device Add.
const revocationsFresh = 5 * time.Second

// refreshRevocations fetches the person's revocations unless this seat
// did within revocationsFresh. A directory that does not answer leaves
// what this seat knew.
func (s *Seat) refreshRevocations(did string) {
	now := s.cfg.Now()
	s.mu.Lock()
	if s.revFetched == nil {
		s.revFetched = map[string]time.Time{}
	}
	last, ok := s.revFetched[did]
	if ok && now.Sub(last) < revocationsFresh {
		s.mu.Unlock()
		return
	}
	s.revFetched[did] = now
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.noteRevocations(ctx, did)
}

// revocationRules refuses what a revoked device would bring into a room:
// an Add of its leaf, or a Commit it made.
func (s *Seat) revocationRules(c mls.CommitCheck) error {
	if s.testOnlyNoRevocations {
		return nil
	}
	at := s.processingAt
	if at.IsZero() {
		at = s.cfg.Now()
	}
	if !c.ProposalOnly && s.revokedBy(c.Committer.SignatureKey, at) {
		return fmt.Errorf("%w: its Commit is refused", ErrRevokedDevice)
	}
	for _, p := range c.Proposals {
		if p.Type == mls.ProposalTypeAdd && p.Added != nil && isDeviceIdentity(p.Added.Identity) {
			// Before a device is let in, this member asks the directory
			// what its person revoked.
			s.refreshRevocations(PersonOf(p.Added.Identity))
		}
		if p.Type == mls.ProposalTypeAdd && p.Added != nil && s.revokedBy(p.Added.SignatureKey, at) {
			return fmt.Errorf("%w: it cannot be added", ErrRevokedDevice)
		}
		if p.SenderMember != nil && s.revokedBy(p.SenderMember.SignatureKey, at) {
			return fmt.Errorf("%w: its proposal is refused", ErrRevokedDevice)
		}
	}
	return nil
}

// offerRevoked reports whether a join offer (or device offer) is of a
// revoked key, after fetching its person's revocations.
func (s *Seat) offerRevoked(ctx context.Context, kps [][]byte) bool {
	seen := map[string]bool{}
	for _, kp := range kps {
		cred, sigKey, err := mls.KeyPackageLeaf(kp)
		if err != nil {
			continue
		}
		person := PersonOf(string(cred.Identity))
		if !seen[person] {
			seen[person] = true
			s.noteRevocations(ctx, person)
			s.mu.Lock()
			if s.revFetched == nil {
				s.revFetched = map[string]time.Time{}
			}
			s.revFetched[person] = s.cfg.Now()
			s.mu.Unlock()
		}
		if s.isRevokedKey(sigKey) {
			return true
		}
	}
	return false
}

// revokedOr makes the planes' answers to a revoked credential match
// ErrRevoked: the directory's code "revoked" does already (APIError.Is);
// the relay answers a revoked subject with "subject is revoked".
func revokedOr(err error) error {
	if err == nil || errors.Is(err, ErrRevoked) {
		return err
	}
	if strings.Contains(err.Error(), "subject is revoked") {
		return fmt.Errorf("%w: %w", ErrRevoked, err)
	}
	return err
}

// Revoke revokes the device with the id (see above). It needs the
// identity ([ErrNotIdentityHolder]); this home's own device cannot be
// revoked from here.
func (s *Seat) Revoke(ctx context.Context, id string) (RevokedDevice, error) {
	out := RevokedDevice{Device: id}
	ident, err := s.identityKey()
	if err != nil {
		return out, err
	}
	_, self, err := s.memberKey(ctx)
	if err != nil {
		return out, err
	}
	if id == DeviceID(self) {
		return out, errors.New("seat: this is this home's own device; leave its rooms instead")
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return out, err
	}
	dir := s.directory(key)
	var signing []byte
	devs, err := dir.LinkedDevices(ctx)
	if err != nil {
		return out, revokedOr(err)
	}
	for _, d := range devs {
		if d.ID == id {
			if _, err := d.certificate(ident.PublicKey()); err == nil {
				signing, out.Linked = d.SigningKey, true
			}
		}
	}
	if signing == nil {
		// A device known only from the rooms (one restored from the
		// phrase): its leaf's key.
		person := ident.DID()
		s.eachRoom(ctx, func(r *room) error {
			for _, m := range r.g.Members() {
				if signing == nil && PersonOf(m.Identity) == person && m.Identity != self && DeviceID(m.Identity) == id &&
					!bytes.Equal(m.SignatureKey, ident.PublicKey()) {
					signing = bytes.Clone(m.SignatureKey)
				}
			}
			return nil
		})
	}
	if signing == nil {
		return out, ErrNoDevice
	}
	rev, err := devcert.Revoke(ident.PrivateKey(), signing, s.cfg.Now())
	if err != nil {
		return out, err
	}
	if err := s.keepRevocation(ctx, rev); err != nil {
		return out, err
	}
	if _, err := dir.PublishRevocation(ctx, rev.Bytes()); err != nil {
		return out, fmt.Errorf("seat: the directory did not take the revocation: %w", err)
	}
	out.Directory = true
	if out.Linked {
		if out.Epoch, out.Given, err = s.rekey(ctx, signing); err != nil {
			return out, fmt.Errorf("seat: the device is revoked, but the sync key did not move to a new epoch (run revoke again): %w", err)
		}
	}
	out.Rooms, err = s.removeDeviceLeaves(ctx, self, signing)
	return out, err
}

// removeDeviceLeaves removes the leaves signed by key from every room of
// this home, one Commit per room.
func (s *Seat) removeDeviceLeaves(ctx context.Context, self string, key []byte) ([]string, error) {
	var done []string
	err := s.eachRoom(ctx, func(r *room) error {
		var leaves []uint32
		for _, m := range r.g.Members() {
			if m.Identity != self && bytes.Equal(m.SignatureKey, key) {
				leaves = append(leaves, m.LeafIndex)
			}
		}
		if len(leaves) == 0 {
			return nil
		}
		if _, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return r.g.RemoveMembers(leaves...) }); err != nil {
			return fmt.Errorf("seat: removing the device from %s: %w", r.channel, err)
		}
		done = append(done, r.channel)
		return nil
	})
	return done, err
}

// DeviceInfo is one device of this person for `tally devices list`.
type DeviceInfo struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	// LinkedAt and LastSeen are the directory's, for linked devices.
	LinkedAt time.Time `json:"linked_at"`
	LastSeen time.Time `json:"last_seen"`
	// HoldsIdentity says the device holds the phrase (it can approve and
	// revoke devices); a linked device does not.
	HoldsIdentity bool      `json:"holds_identity"`
	RevokedAt     time.Time `json:"revoked_at"`
	This          bool      `json:"this"`
	// Rooms are this home's rooms the device is in.
	Rooms []string `json:"rooms"`
}

// DeviceList lists this person's devices: the linked ones the directory
// knows, and those holding the phrase that this home's rooms show (and
// this home).
func (s *Seat) DeviceList(ctx context.Context) ([]DeviceInfo, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	linked, err := s.directory(key).LinkedDevices(ctx)
	if err != nil {
		return nil, revokedOr(err)
	}
	inRooms, err := s.Devices(ctx)
	if err != nil {
		return nil, revokedOr(err)
	}
	rooms := map[string][]string{}
	for _, d := range inRooms {
		rooms[d.ID] = d.Rooms
	}
	_, self, err := s.memberKey(ctx)
	if err != nil {
		return nil, err
	}
	var out []DeviceInfo
	seen := map[string]bool{}
	if s.HoldsIdentity() {
		out = append(out, DeviceInfo{ID: DeviceID(self), Label: "this device", HoldsIdentity: true, This: true, Rooms: rooms[DeviceID(self)]})
		seen[DeviceID(self)] = true
	}
	for _, d := range linked {
		out = append(out, DeviceInfo{ID: d.ID, Label: d.Label, LinkedAt: d.LinkedAt, LastSeen: d.LastSeen, RevokedAt: d.RevokedAt,
			This: d.ID == DeviceID(self), Rooms: rooms[d.ID]})
		seen[d.ID] = true
	}
	for _, d := range inRooms {
		if !seen[d.ID] {
			// In the rooms, not linked: a device restored from the phrase
			// (or the person's own key).
			out = append(out, DeviceInfo{ID: d.ID, HoldsIdentity: !strings.Contains(d.Identity, devcert.IdentityMark), This: d.This, Rooms: d.Rooms})
		}
	}
	return out, nil
}
