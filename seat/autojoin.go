package seat

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/mls"
)

// Joining without the owner, and rejoining.
//
// The directory keeps each room's latest GroupInfo (with external_pub, and
// the ratchet tree while it is small; a large room's tree is kept beside
// it, tree.go), which whoever commits puts there (shareGroupInfo).
// Two kinds of external Commit (RFC 9420 §12.4.3.2) are then admitted by
// every member's engine (externalRules); nothing else from outside is:
//
//   - A join by an invite that admits on its own ([Seat.RoomInviteAuto]).
//     The owner mints the invite at the directory and commits the invite's
//     public key to the room's invites extension (InvitesExtensionType).
//     The key is derived from the invite token, so whoever holds the token
//     holds the private key: the joiner puts in its Commit's
//     authenticated_data (inviteTicketMagic) the public key and its
//     signature, by the private key, over the group, the epoch and the
//     joiner's identity. The directory checks the invite's uses, expiry
//     and org, makes the joiner's account a member of the channel and
//     hands it the GroupInfo; the members check the ticket. A ticket is
//     good for one identity in one epoch only.
//   - A member taking its own place again (a resync): the Commit removes
//     the leaf with the joiner's identity and signature key, which only
//     that member can sign for ([Seat.RoomRejoin]).

// InvitesExtensionType is the GroupContext extension that lists the
// public keys of a room's auto invites: 32-byte Ed25519 keys, one after the
// other, at most maxInvites (private use, RFC 9420 §17.3).
const InvitesExtensionType mls.ExtensionType = 0xFF0B

// maxInvites is how many auto invites a room lists; a new one pushes out
// the oldest.
const maxInvites = 32

// inviteTicketMagic starts an invite ticket in an external Commit's
// authenticated_data.
const inviteTicketMagic = "SKI1"

const (
	labelInviteKey    = "skytale room invite v1"
	labelInviteTicket = "skytale room invite ticket v1\x00"
)

var (
	errNoTicket = errors.New("seat: a room admits from outside only a join by an auto invite, or a member taking its own place again")
	// ErrInviteNotAdmitted: the room's members did not admit the join by
	// this invite (it is not, or no longer, listed in the room).
	ErrInviteNotAdmitted = errors.New("seat: the room does not admit joins by this invite")
)

// inviteKey derives an auto invite's key pair from its token.
func inviteKey(token string) ed25519.PrivateKey {
	seed, err := hkdf.Key(sha256.New, []byte(token), nil, labelInviteKey, ed25519.SeedSize)
	if err != nil {
		panic(err) // only for lengths HKDF-SHA256 cannot give
	}
	return ed25519.NewKeyFromSeed(seed)
}

func ticketMessage(groupID []byte, epoch uint64, identity string) []byte {
	m := append([]byte(labelInviteTicket), byte(len(groupID)))
	m = append(m, groupID...)
	m = binary.BigEndian.AppendUint64(m, epoch)
	return append(m, identity...)
}

// inviteTicket is the authenticated data of a join by invite.
func inviteTicket(priv ed25519.PrivateKey, groupID []byte, epoch uint64, identity string) []byte {
	out := append([]byte(inviteTicketMagic), priv.Public().(ed25519.PublicKey)...)
	return append(out, ed25519.Sign(priv, ticketMessage(groupID, epoch, identity))...)
}

// invitesIn returns the invite keys of a GroupContext extension list.
func invitesIn(exts []mls.Extension) ([][]byte, error) {
	data := extensionData(exts, InvitesExtensionType)
	if len(data)%ed25519.PublicKeySize != 0 || len(data)/ed25519.PublicKeySize > maxInvites {
		return nil, errors.New("seat: a malformed invites extension")
	}
	var out [][]byte
	for len(data) > 0 {
		k := data[:ed25519.PublicKeySize]
		if slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, k) }) {
			return nil, errors.New("seat: an invite listed twice")
		}
		out = append(out, k)
		data = data[ed25519.PublicKeySize:]
	}
	return out, nil
}

// externalRules is the seat's mls.Config.ExternalPolicy (see above).
func externalRules(g *mls.Group, req mls.ExternalRequest) error {
	if g == nil || req.Sender.SenderType != mls.SenderTypeNewMemberCommit || req.Joiner == nil {
		return errNoTicket
	}
	if req.Replaces != nil {
		if req.Replaces.Identity == req.Joiner.Identity && bytes.Equal(req.Replaces.SignatureKey, req.Joiner.SignatureKey) {
			return nil // a member taking its own place again
		}
		return errors.New("seat: an external Commit may replace only its joiner's own leaf")
	}
	ad, ok := bytes.CutPrefix(req.AuthenticatedData, []byte(inviteTicketMagic))
	if !ok || len(ad) != ed25519.PublicKeySize+ed25519.SignatureSize {
		return errNoTicket
	}
	pub, sig := ad[:ed25519.PublicKeySize], ad[ed25519.PublicKeySize:]
	invites, err := invitesIn(g.Extensions())
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(invites, func(k []byte) bool { return bytes.Equal(k, pub) }) {
		return ErrInviteNotAdmitted
	}
	if !ed25519.Verify(pub, ticketMessage(req.GroupID, req.Epoch, req.Joiner.Identity), sig) {
		return errors.New("seat: the invite ticket's signature does not verify")
	}
	return nil
}

// joinWelcome joins the room ch from a Welcome with a configuration bound
// to the new group, fetching the ratchet tree from the directory when the
// Welcome leaves it out (tree.go). A tree that does not open the Welcome
// is ErrTreeMismatch, one that cannot be had ErrTreeUnavailable; either
// way nothing changed.
func (s *Seat) joinWelcome(ctx context.Context, ch string, welcome []byte, b *mls.KeyPackageBundle) (*mls.Group, error) {
	cfg, ref := s.roomConfig()
	f := &fetchedTree{fetch: s.treeFetcher(ctx, ch)}
	g, err := mls.Join(welcome, b, &mls.JoinOptions{FetchTree: f.get}, cfg)
	if err != nil {
		return nil, f.joinError(ch, err)
	}
	ref.g = g
	return g, nil
}

// shareGroupInfo puts r's GroupInfo of its current epoch at the
// directory, so that others can join or rejoin by external Commit; a
// large room's tree goes out of band, put first (tree.go). It is best
// effort: a failure costs only the next external joiner a retry.
//
// The directory keeps a GroupInfo only for the epoch the relay's commit
// fence has reached. The caller's commit was acknowledged, so the fence
// shows it already, unless the directory reads it from afar and behind
// (epoch_not_reached): that is tried again a few times, briefly. A put
// refused as stale means someone committed since; their put replaces
// this one, so it is left to them.
func (s *Seat) shareGroupInfo(ctx context.Context, r *room) {
	out, err := s.shareTree(ctx, r.channel, r.g)
	if err != nil {
		return
	}
	tree := mls.TreeInBand
	if out {
		tree = mls.TreeOutOfBand
	}
	gi, err := r.g.GroupInfoWith(mls.GroupInfoOptions{Tree: tree})
	if err != nil || len(gi) > maxGroupInfo {
		return
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return
	}
	dir := s.directory(key)
	for attempt := 1; ; attempt++ {
		err := dir.PutGroupInfo(ctx, r.channel, r.g.Epoch(), gi)
		var ae *APIError
		if attempt == groupInfoAttempts || !errors.As(err, &ae) || ae.Code != "epoch_not_reached" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
}

// groupInfoAttempts bounds the puts of one GroupInfo the fence has not
// shown yet (100, 200 ms apart).
const groupInfoAttempts = 3

// maxGroupInfo is the largest GroupInfo the directory keeps.
const maxGroupInfo = 1 << 20

// RoomInviteAuto mints an invite to a room this seat owns whose holder
// joins by itself, with nobody online to admit it ([Seat.RoomJoin]
// completes at once), and lists it in the room. Zero values take the
// directory's defaults (one use, one hour).
func (s *Seat) RoomInviteAuto(ctx context.Context, name string, uses int, ttl time.Duration) (string, error) {
	var tok string
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUpSettled(ctx, r, nil); err != nil {
			return err
		}
		if !r.g.Active() {
			return ErrRemovedRoom
		}
		if r.role != "owner" {
			return ErrNotOwner
		}
		key, err := s.apiKey(ctx)
		if err != nil {
			return err
		}
		if tok, _, err = s.directory(key).InviteAuto(ctx, r.channel, uses, int(ttl/time.Second)); err != nil {
			return err
		}
		pub := inviteKey(tok).Public().(ed25519.PublicKey)
		_, err = s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
			exts := r.g.Extensions()
			keys, err := invitesIn(exts)
			if err != nil {
				return nil, err
			}
			keys = append(keys, pub)
			if len(keys) > maxInvites {
				keys = keys[len(keys)-maxInvites:]
			}
			return r.g.Commit(mls.CommitOptions{Extensions: withExtension(exts, InvitesExtensionType, bytes.Join(keys, nil))})
		})
		if err != nil {
			return fmt.Errorf("seat: the invite was minted but the room does not list it (its members' software may not know invites that admit on their own): %w", err)
		}
		return nil
	})
	return tok, err
}

// withExtension returns exts with extension t set to data.
func withExtension(exts []mls.Extension, t mls.ExtensionType, data []byte) []mls.Extension {
	out := slices.Clone(exts)
	for i := range out {
		if out[i].ExtensionType == t {
			out[i].ExtensionData = data
			return out
		}
	}
	return append(out, mls.Extension{ExtensionType: t, ExtensionData: data})
}

// joinByInvite joins ch by external Commit with an auto invite's token,
// from the GroupInfo the directory handed out (gi, of epoch), fetching a
// newer one when the room moved on. The caller holds the room lock.
func (s *Seat) joinByInvite(ctx context.Context, dir *DirectoryClient, ch, token string, epoch uint64, gi []byte) error {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return err
	}
	priv := inviteKey(token)
	gid := channel.GroupID(ch)
	delay := 100 * time.Millisecond
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
			delay = min(2*delay, 2*time.Second)
			if epoch, gi, err = dir.GroupInfo(ctx, ch); err != nil {
				var ae *APIError
				if errors.As(err, &ae) && ae.Status == 404 {
					continue // nobody has put one yet
				}
				return err
			}
		}
		if gi == nil {
			continue
		}
		r, err := s.externalCommit(ctx, ch, gi, sig, id, &mls.ExternalJoinOptions{AuthenticatedData: inviteTicket(priv, gid[:], epoch, id)})
		if errors.Is(err, ErrStaleEpoch) || errors.Is(err, ErrNotMember) {
			continue // the room moved on, or the relay has not heard of the membership yet
		}
		if err != nil {
			return err
		}
		return s.saveRoom(ctx, r, true)
	}
	return fmt.Errorf("seat: the join by invite to %s did not go through; try again", ch)
}

// externalCommit joins ch by external Commit from gi, in whichever room
// suite gi is of, publishes the Commit, and returns the room (not yet
// stored).
func (s *Seat) externalCommit(ctx context.Context, ch string, gi, sig []byte, id string, opts *mls.ExternalJoinOptions) (*room, error) {
	var g *mls.Group
	var commit []byte
	var err error
	// A GroupInfo without the tree is joined with the tree fetched from
	// the directory (tree.go), once for all the suites tried.
	o := mls.ExternalJoinOptions{}
	if opts != nil {
		o = *opts
	}
	f := &fetchedTree{fetch: s.treeFetcher(ctx, ch)}
	o.FetchTree = f.get
	for _, cs := range roomSuites {
		b, kerr := mls.NewKeyPackage(cs, id, sig, s.mlsConfig())
		if kerr != nil {
			return nil, kerr
		}
		cfg, ref := s.roomConfig()
		if g, commit, err = mls.JoinExternalWith(gi, b, &o, cfg); err == nil {
			ref.g = g
			break
		}
		if treeTrouble(err) {
			break
		}
	}
	if err != nil {
		return nil, f.joinError(ch, err)
	}
	if _, _, err := rolesIn(g.Extensions()); err != nil {
		return nil, fmt.Errorf("seat: the room %s carries roles that cannot be read: %w", ch, err)
	}
	conn, err := s.roomPublisher(ctx, ch)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	seq, err := conn.Publish(ctx, ch, commit)
	if err != nil {
		return nil, err
	}
	r := &room{channel: ch, role: "member", g: g, lastSeq: seq}
	s.shareGroupInfo(ctx, r)
	return r, nil
}
