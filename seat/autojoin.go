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
//   - A join by an invite that admits on its own ([Room.Invite] with Auto).
//     The owner mints the invite at the directory and commits the invite's
//     public key, its lifetime and its uses to the room's invites
//     extension (invites.go). The key is derived from the invite token, so
//     whoever holds the token holds the private key: the joiner puts in its
//     Commit's authenticated_data (inviteTicketMagic) the public key and
//     its signature, by the private key, over the group, the epoch and the
//     joiner's identity, and records the use in the same Commit. The
//     directory checks the invite's uses, expiry and org, makes the
//     joiner's account a member of the channel and hands it the GroupInfo;
//     the members check the ticket, and the uses and lifetime themselves
//     (invites.go). A ticket is good for one identity in one epoch only.
//   - A member taking its own place again (a resync): the Commit removes
//     the leaf with the joiner's identity and signature key, which only
//     that member can sign for ([Room.Rejoin]).

// inviteTicketMagic starts an invite ticket in an external Commit's
// authenticated_data.
const inviteTicketMagic = "SKI1"

const (
	labelInviteKey    = "skytale room invite v1"
	labelInviteTicket = "skytale room invite ticket v1\x00"
)

var (
	errNoTicket = errors.New("seat: a room admits from outside only a join by an auto invite, or a member taking its own place again")
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

// externalRules is the seat's mls.Config.ExternalPolicy (see above), at
// this member's time now.
func externalRules(g *mls.Group, req mls.ExternalRequest, now time.Time) error {
	if g == nil || req.Sender.SenderType != mls.SenderTypeNewMemberCommit || req.Joiner == nil {
		return errNoTicket
	}
	if req.Replaces != nil {
		if req.Replaces.Identity != req.Joiner.Identity || !bytes.Equal(req.Replaces.SignatureKey, req.Joiner.SignatureKey) {
			return errors.New("seat: an external Commit may replace only its joiner's own leaf")
		}
		if !sameExtensions(req.Extensions, g.Extensions()) {
			return errors.New("seat: a member taking its own place again changes nothing in the room")
		}
		return nil // a member taking its own place again
	}
	ad, ok := bytes.CutPrefix(req.AuthenticatedData, []byte(inviteTicketMagic))
	if !ok || len(ad) != ed25519.PublicKeySize+ed25519.SignatureSize {
		return errNoTicket
	}
	return checkInviteJoin(g, req, ad[:ed25519.PublicKeySize], ad[ed25519.PublicKeySize:], now)
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

// autoInviteTo is [Room.Invite] (an auto invite) on the room called name.
func (s *Seat) autoInviteTo(ctx context.Context, name string, uses int, ttl time.Duration) (string, error) {
	if uses == 0 {
		uses = 1
	}
	if ttl == 0 {
		ttl = time.Hour
	}
	if uses < 1 || uses > maxInviteUses {
		return "", fmt.Errorf("seat: an invite has 1 to %d uses", maxInviteUses)
	}
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
		// The token is made here; the directory sees only what counts
		// its uses (invites.go).
		tok = newRoomToken()
		priv, dirTok, err := inviteCredentials(tok)
		if err != nil {
			return err
		}
		if _, err = s.directory(key).InviteAutoHashed(ctx, r.channel, uses, int(ttl/time.Second), directoryTokenHash(dirTok)); err != nil {
			return err
		}
		now := s.cfg.Now()
		e := roomInvite{key: priv.Public().(ed25519.PublicKey), notAfter: uint64(now.Add(ttl).Unix()), maxUses: uses}
		_, err = s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
			exts, err := withInvite(r.g.Extensions(), e, now)
			if err != nil {
				return nil, err
			}
			return r.g.Commit(mls.CommitOptions{Extensions: exts})
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

// joinByInvite joins ch by external Commit with an auto invite's key,
// from the GroupInfo the directory handed out (gi, of epoch), fetching a
// newer one when the room moved on. The caller holds the room lock.
func (s *Seat) joinByInvite(ctx context.Context, dir *DirectoryClient, ch string, priv ed25519.PrivateKey, epoch uint64, gi []byte) error {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return err
	}
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
		r, err := s.externalCommit(ctx, ch, gi, sig, id, inviteJoinOptions(priv, gid[:], epoch, id))
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

// inviteJoinOptions are those of an external Commit that joins as
// identity by the invite priv at epoch: the ticket, and the use recorded in
// the room (invites.go).
func inviteJoinOptions(priv ed25519.PrivateKey, groupID []byte, epoch uint64, identity string) *mls.ExternalJoinOptions {
	pub := priv.Public().(ed25519.PublicKey)
	return &mls.ExternalJoinOptions{
		AuthenticatedData: inviteTicket(priv, groupID, epoch, identity),
		Extensions: func(cur []mls.Extension) ([]mls.Extension, error) {
			return recordUse(cur, pub, identity)
		},
	}
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
		if treeTrouble(err) || errors.Is(err, ErrInviteNotAdmitted) || errors.Is(err, ErrInviteUsed) || errors.Is(err, ErrRemovedRoom) {
			break // the right suite, and the room's own answer
		}
	}
	if err != nil {
		return nil, f.joinError(ch, err)
	}
	if _, _, err := rolesIn(g.Extensions()); err != nil {
		return nil, fmt.Errorf("seat: the room %s carries roles that cannot be read: %w", ch, err)
	}
	conn, err := s.roomPub(ctx, ch)
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
