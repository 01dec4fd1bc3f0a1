package seat

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// Auto invites are the room's, not the directory's.
//
// An auto invite's limits live in the room's GroupContext, in the invites
// extension (InvitesExtensionType), beside its public key: when it stops
// (not_after) and how many persons may use it (max_uses), with a tag of
// each person that has. The external Commit that uses an invite records
// the use in the same Commit, with a GroupContextExtensions proposal (RFC
// 9420 §12.1.7; the room's engines admit that proposal in an external
// Commit, mls.Config.ExternalCommitExtensions, a departure from §12.4.3.2)
// that adds the joiner's tag to the entry, or drops the entry when the use
// was its last. Every member's engine (externalRules) refuses a join by
// invite that:
//
//   - names a key the room does not list (never listed, used up, or
//     listed only in the invites extension of before limits, which no
//     member can count: legacyInvitesExtensionType);
//   - comes after not_after by this member's own clock, with inviteSlack
//     for clocks that differ;
//   - is by a person that used the invite already (so a person removed
//     after joining by an invite never comes back by it), by a person
//     removed from the room since the invite was made (the Commit that
//     removes a person bars it from every invite the room lists then,
//     withBarred; invites made later admit it again), or by a person that
//     is a member already;
//   - does not record its use exactly as above, or changes anything else;
//   - carries a ticket that the invite's key did not sign for this group,
//     this epoch and the joiner's identity.
//
// The joiner's Commit is signed by the joiner's own leaf key, which its
// did:key names, and the ticket names that identity: a member that knows
// an invite's token cannot join anyone else with it, since it cannot sign
// for another identity. What the protocol leaves open: a holder of a
// token with uses left can give it (or the invite key) to someone else,
// who then joins as itself; that use counts like any other. A bearer
// invite is only as private as its holders keep it. And the directory
// learns a joiner's account from the join request, which names the
// identity the joiner says it will join as, with proof that it holds
// that identity's key; a removal by that identity ends the account's
// membership. A joiner that names one of its keys there and joins the
// room as another is removed at once by the first seat of the owner or
// an admin that reads its join (checkInviteJoiners, in settle.go, which
// says why a removal and not a refusal), and barred from the room's
// invites by that removal; the record of the identity it named, never in
// the group, lapses once its grace is over (lapseStrayJoins), and with it
// the account's membership.

// The token of an auto invite is made by the inviting seat: 32 random
// bytes (roomTokenPrefix and their unpadded base64url), from which HKDF
// (RFC 5869) derives, under distinct labels, the invite's Ed25519 key and
// a separate directory credential (an skt_inv_ token). The directory gets
// the credential's SHA-256 when the invite is made, and the credential at
// a join, to count uses, lifetime and org as it does for its own tokens;
// nothing it holds or sees derives the invite key, so a directory that
// kept all of it still cannot sign a ticket the room admits. Auto invites
// the directory minted before (an skt_inv_ token whose key derives from
// the token itself) are still joined, but rooms no longer list such keys.
const roomTokenPrefix = "skt_room_"

const (
	labelRoomInviteKey  = "skytale room invite key v2"
	labelRoomInviteDir  = "skytale room invite directory v2"
	roomTokenSecretSize = 32
)

// newRoomToken draws the secret of a new auto invite and returns its
// token.
func newRoomToken() string {
	secret := make([]byte, roomTokenSecretSize)
	rand.Read(secret)
	return roomTokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
}

// inviteCredentials returns, for an auto invite's token, the key that
// signs its tickets and the token to show the directory.
func inviteCredentials(token string) (ed25519.PrivateKey, string, error) {
	enc, ok := strings.CutPrefix(token, roomTokenPrefix)
	if !ok {
		return inviteKey(token), token, nil // minted by the directory
	}
	secret, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(secret) != roomTokenSecretSize {
		return nil, "", errors.New("seat: a malformed room invite token")
	}
	seed, err := hkdf.Key(sha256.New, secret, nil, labelRoomInviteKey, ed25519.SeedSize)
	if err != nil {
		return nil, "", err
	}
	cred, err := hkdf.Key(sha256.New, secret, nil, labelRoomInviteDir, roomTokenSecretSize)
	if err != nil {
		return nil, "", err
	}
	return ed25519.NewKeyFromSeed(seed), "skt_inv_" + base64.RawURLEncoding.EncodeToString(cred), nil
}

// directoryTokenHash is what the directory keeps of a directory credential.
func directoryTokenHash(dirToken string) []byte {
	sum := sha256.Sum256([]byte(dirToken))
	return sum[:]
}

// InvitesExtensionType is the GroupContext extension of a room's auto
// invites and their limits (private use, RFC 9420 §17.3). Encoding (RFC
// 9420 §2.1 presentation language):
//
//	struct {
//	    opaque key[32];         // the invite's Ed25519 public key
//	    uint64 not_after;       // Unix seconds
//	    uint8  max_uses;        // 1..100
//	    uint8  uses;            // < max_uses
//	    opaque used_by[16][uses]; // inviteUseTag of each person that used it
//	    uint8  bars;            // at most maxBarred
//	    opaque barred[16][bars];  // inviteUseTag of each person removed since
//	} InviteEntry;
//
//	struct {
//	    uint8 version;          // 1
//	    InviteEntry entries[];  // to the end; at most maxInvites, keys distinct
//	} RoomInvites;
const InvitesExtensionType mls.ExtensionType = 0xFF0C

// legacyInvitesExtensionType listed auto invites' keys alone (32 bytes
// each). Rooms that carry it keep it, but it admits nobody any more: its
// invites' uses and lifetimes were counted only by the directory.
const legacyInvitesExtensionType mls.ExtensionType = 0xFF0B

// Limits of the invites extension.
const (
	invitesVersion = 1
	// maxInvites is how many auto invites a room lists; a new one pushes
	// out the oldest.
	maxInvites = 32
	// maxInviteUses is the most uses an invite can have, as the
	// directory's max_uses.
	maxInviteUses = 100
	// inviteSlack is how far past an invite's not_after a member's clock
	// may be and still admit a join by it: members' clocks differ, and the
	// joiner's Commit takes a moment to reach them. Five minutes admits
	// ordinary clock drift, not a stolen day.
	inviteSlack = 5 * time.Minute
	// maxBarred is how many removed persons one invite remembers; past
	// it the oldest goes (the directory still refuses it, by account).
	maxBarred       = 64
	inviteTagSize   = 16
	inviteEntryHead = ed25519.PublicKeySize + 8 + 1 + 1
)

var (
	// errBarred: the person was removed from the room since the invite
	// was made.
	errBarred = fmt.Errorf("%w since the invite was made; only a later invite admits it again", ErrRemovedRoom)
	// errUseUnrecorded: a join by invite that does not record its use in
	// the room as the rules say.
	errUseUnrecorded = errors.New("seat: a join by invite must record its use in the room, and change nothing else")
)

// roomInvite is one entry of the invites extension.
type roomInvite struct {
	key      []byte
	notAfter uint64 // Unix seconds
	maxUses  int
	usedBy   [][]byte // inviteUseTags
	barred   [][]byte // inviteUseTags of persons removed since
}

// inviteUseTag is what the room keeps of a person that used an invite:
// enough to refuse the same person again, without listing its did:key.
func inviteUseTag(identity string) []byte {
	sum := sha256.Sum256([]byte("skytale invite use v1\x00" + PersonOf(identity)))
	return sum[:inviteTagSize]
}

func (e *roomInvite) used(tag []byte) bool { return hasTag(e.usedBy, tag) }

func (e *roomInvite) bars(tag []byte) bool { return hasTag(e.barred, tag) }

func hasTag(tags [][]byte, tag []byte) bool {
	return slices.ContainsFunc(tags, func(t []byte) bool { return bytes.Equal(t, tag) })
}

// expired reports whether the invite is over at now, slack included.
func (e *roomInvite) expired(now time.Time) bool {
	return now.Add(-inviteSlack).Unix() > int64(min(e.notAfter, 1<<62))
}

// marshalInvites encodes a RoomInvites.
func marshalInvites(es []roomInvite) []byte {
	out := []byte{invitesVersion}
	for _, e := range es {
		out = append(out, e.key...)
		out = binary.BigEndian.AppendUint64(out, e.notAfter)
		out = append(out, byte(e.maxUses), byte(len(e.usedBy)))
		for _, t := range e.usedBy {
			out = append(out, t...)
		}
		out = append(out, byte(len(e.barred)))
		for _, t := range e.barred {
			out = append(out, t...)
		}
	}
	return out
}

// readTags reads n tags off the front of data, refusing truncation and a
// tag listed twice (twice names that refusal). It returns the tags, the
// rest of data, and why it refused ("" when it did not).
func readTags(data []byte, n int, twice string) (tags [][]byte, rest []byte, why string) {
	if len(data) < n*inviteTagSize {
		return nil, nil, "truncated"
	}
	for range n {
		t := data[:inviteTagSize]
		if hasTag(tags, t) {
			return nil, nil, twice
		}
		tags = append(tags, t)
		data = data[inviteTagSize:]
	}
	return tags, data, ""
}

// parseInvites decodes a RoomInvites, refusing anything malformed: another
// version, truncation, more than maxInvites entries, a key listed twice,
// max_uses out of 1..100, uses not below max_uses, more than maxBarred
// bars, a tag listed twice in one list. A decoded value re-encodes to the
// same bytes.
func parseInvites(data []byte) ([]roomInvite, error) {
	bad := func(why string) ([]roomInvite, error) { return nil, errors.New("seat: invites: " + why) }
	if len(data) == 0 || data[0] != invitesVersion {
		return bad("unknown version")
	}
	data = data[1:]
	var out []roomInvite
	for len(data) > 0 {
		if len(out) == maxInvites {
			return bad("too many invites")
		}
		if len(data) < inviteEntryHead {
			return bad("truncated")
		}
		e := roomInvite{
			key:      data[:ed25519.PublicKeySize],
			notAfter: binary.BigEndian.Uint64(data[ed25519.PublicKeySize:]),
			maxUses:  int(data[ed25519.PublicKeySize+8]),
		}
		uses := int(data[ed25519.PublicKeySize+9])
		data = data[inviteEntryHead:]
		if e.maxUses < 1 || e.maxUses > maxInviteUses {
			return bad("max_uses out of range")
		}
		if uses >= e.maxUses {
			return bad("an invite used up is still listed")
		}
		var why string
		if e.usedBy, data, why = readTags(data, uses, "a use listed twice"); why != "" {
			return bad(why)
		}
		if len(data) < 1 {
			return bad("truncated")
		}
		bars := int(data[0])
		data = data[1:]
		if bars > maxBarred {
			return bad("too many removed persons")
		}
		if e.barred, data, why = readTags(data, bars, "a removed person listed twice"); why != "" {
			return bad(why)
		}
		if slices.ContainsFunc(out, func(o roomInvite) bool { return bytes.Equal(o.key, e.key) }) {
			return bad("an invite listed twice")
		}
		out = append(out, e)
	}
	return out, nil
}

// invitesIn returns the auto invites of a GroupContext extension list.
func invitesIn(exts []mls.Extension) ([]roomInvite, error) {
	data := extensionData(exts, InvitesExtensionType)
	if data == nil {
		return nil, nil
	}
	return parseInvites(data)
}

// findInvite is the index of the invite with key in es, or -1.
func findInvite(es []roomInvite, key []byte) int {
	return slices.IndexFunc(es, func(e roomInvite) bool { return bytes.Equal(e.key, key) })
}

// recordUse returns exts with the use of the invite key by identity
// recorded: its tag added to the invite's entry, or the entry dropped when
// that was its last use. It refuses a key the room does not list, a
// person that used the invite already and one removed since it was made.
func recordUse(exts []mls.Extension, key []byte, identity string) ([]mls.Extension, error) {
	es, err := invitesIn(exts)
	if err != nil {
		return nil, err
	}
	i := findInvite(es, key)
	if i < 0 {
		return nil, ErrInviteNotAdmitted
	}
	tag := inviteUseTag(identity)
	if es[i].used(tag) {
		return nil, ErrInviteUsed
	}
	if es[i].bars(tag) {
		return nil, errBarred
	}
	if len(es[i].usedBy)+1 >= es[i].maxUses {
		es = slices.Delete(es, i, i+1)
	} else {
		es[i].usedBy = append(slices.Clone(es[i].usedBy), tag)
	}
	return withExtension(exts, InvitesExtensionType, marshalInvites(es)), nil
}

// withBarred returns exts with the persons of ids barred from every
// invite the room lists (see the top of this file), and whether that
// changed anything.
func withBarred(exts []mls.Extension, ids []string) ([]mls.Extension, bool, error) {
	es, err := invitesIn(exts)
	if err != nil || len(es) == 0 {
		return exts, false, err
	}
	changed := false
	for i := range es {
		for _, id := range ids {
			if tag := inviteUseTag(id); !es[i].bars(tag) {
				es[i].barred = append(slices.Clone(es[i].barred), tag)
				changed = true
			}
		}
		if n := len(es[i].barred); n > maxBarred {
			es[i].barred = es[i].barred[n-maxBarred:]
		}
	}
	return withExtension(exts, InvitesExtensionType, marshalInvites(es)), changed, nil
}

// withInvite returns exts with the invite e listed, after dropping the
// invites that are over at now and, past maxInvites, the oldest.
func withInvite(exts []mls.Extension, e roomInvite, now time.Time) ([]mls.Extension, error) {
	es, err := invitesIn(exts)
	if err != nil {
		return nil, err
	}
	es = slices.DeleteFunc(es, func(o roomInvite) bool { return o.expired(now) || bytes.Equal(o.key, e.key) })
	es = append(es, e)
	if len(es) > maxInvites {
		es = es[len(es)-maxInvites:]
	}
	return withExtension(exts, InvitesExtensionType, marshalInvites(es)), nil
}

// sameExtensions reports whether a and b are the same list, byte for byte.
func sameExtensions(a, b []mls.Extension) bool {
	return slices.EqualFunc(a, b, func(x, y mls.Extension) bool {
		return x.ExtensionType == y.ExtensionType && bytes.Equal(x.ExtensionData, y.ExtensionData)
	})
}

// checkInviteJoin applies the rules at the top of this file to a join by
// the invite pub, with the ticket signature sig, at now.
func checkInviteJoin(g *mls.Group, req mls.ExternalRequest, pub, sig []byte, now time.Time) error {
	exts := g.Extensions()
	es, err := invitesIn(exts)
	if err != nil {
		return err
	}
	i := findInvite(es, pub)
	if i < 0 {
		return ErrInviteNotAdmitted
	}
	if es[i].expired(now) {
		return ErrInviteExpired
	}
	if es[i].used(inviteUseTag(req.Joiner.Identity)) {
		return ErrInviteUsed
	}
	if es[i].bars(inviteUseTag(req.Joiner.Identity)) {
		return errBarred
	}
	person := PersonOf(req.Joiner.Identity)
	for _, m := range g.Members() {
		if PersonOf(m.Identity) == person {
			return fmt.Errorf("seat: %s is a member of the room already; an invite does not add it again", person)
		}
	}
	if !ed25519.Verify(pub, ticketMessage(req.GroupID, req.Epoch, req.Joiner.Identity), sig) {
		return errors.New("seat: the invite ticket's signature does not verify")
	}
	want, err := recordUse(exts, pub, req.Joiner.Identity)
	if err != nil {
		return err
	}
	if !sameExtensions(want, req.Extensions) {
		return errUseUnrecorded
	}
	return nil
}
