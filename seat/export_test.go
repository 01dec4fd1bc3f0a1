package seat

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/mls"
)

// SetTestOnlyBeforeCommit installs f to run just before each of this
// package's commits is published; it returns a function that puts back
// what was there before.
func SetTestOnlyBeforeCommit(f func()) (restore func()) {
	prev := testOnlyBeforeCommit
	testOnlyBeforeCommit = f
	return func() { testOnlyBeforeCommit = prev }
}

// SetTestOnlyAfterCommit installs f to run after the relay accepted a
// commit and before the seat confirms it.
func SetTestOnlyAfterCommit(f func() error) (restore func()) {
	prev := testOnlyAfterCommit
	testOnlyAfterCommit = f
	return func() { testOnlyAfterCommit = prev }
}

// SetTestOnlyNoRoleRules makes s ignore the room roles in its own
// Commits and in those it receives, as a hostile member's engine would.
func SetTestOnlyNoRoleRules(s *Seat, on bool) { s.testOnlyNoRoleRules = on }

// ForceRoomRemove commits the removal of did from the room without the
// seat's own role checks, as a hostile member's software would.
func ForceRoomRemove(s *Seat, ctx context.Context, name, did string) error {
	return s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
			m, ok := r.g.MemberByIdentity(did)
			if !ok {
				return nil, ErrNoRoom
			}
			return r.g.RemoveMembers(m.LeafIndex)
		})
		return err
	})
}

// RefreshDue is refreshDue.
func RefreshDue(exp time.Time, life time.Duration) time.Duration { return refreshDue(exp, life) }

// ForceRoomRoles commits data as the room's roles extension, unchecked,
// as a hostile owner's software would.
func ForceRoomRoles(s *Seat, ctx context.Context, name string, data []byte) error {
	return s.withNamedRoom(ctx, name, func(r *room) error {
		_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
			exts := r.g.Extensions()
			for i := range exts {
				if exts[i].ExtensionType == RolesExtensionType {
					exts[i].ExtensionData = data
				}
			}
			return r.g.Commit(mls.CommitOptions{Extensions: exts})
		})
		return err
	})
}

// PublishToRoomGroup publishes what build makes with the room's group (a
// proposal, an application message, ...), storing the group's state
// first, as a member's software (hostile or not) would.
func PublishToRoomGroup(s *Seat, ctx context.Context, name string, build func(*mls.Group) ([]byte, error)) error {
	return s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		msg, err := build(r.g)
		if err != nil {
			return err
		}
		// The group keeps what it needs of what it made (the private key
		// of an Update, the ratchet of a message).
		if err := s.saveRoom(ctx, r, false); err != nil {
			return err
		}
		conn, err := s.roomPublisher(ctx, r.channel)
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Publish(ctx, r.channel, msg)
		return err
	})
}

// UnsealStored opens a value the home sealed, as kind ("room state",
// "key package", "credential", ...) of row id.
func UnsealStored(s *Seat, kind, id string, sealed []byte) ([]byte, error) {
	l, err := s.sealer()
	if err != nil {
		return nil, err
	}
	return l.open(kind, id, sealed)
}

// AddKeyPackage commits the addition of the KeyPackage kp to the room,
// and returns the Welcome.
func AddKeyPackage(s *Seat, ctx context.Context, name string, kp []byte) ([]byte, error) {
	var welcome []byte
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		res, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return r.g.AddMembers(kp) })
		if err == nil {
			welcome = res.Welcome
		}
		return err
	})
	return welcome, err
}

// MLSConfig is the engine configuration of s's rooms.
func MLSConfig(s *Seat) *mls.Config { return s.mlsConfig() }

// ForgeInviteJoin has member, whose software ignores the directory,
// publish an external Commit that joins joiner (which lent it its key) to
// the room ch by the auto invite token, from the GroupInfo member fetches
// with its own account: the join a plain member would make for an
// outsider. The Commit records the use as an honest joiner's would, or,
// when the room lists no use left to record, changes nothing.
func ForgeInviteJoin(member, joiner *Seat, ctx context.Context, ch, token string) error {
	key, err := member.apiKey(ctx)
	if err != nil {
		return err
	}
	epoch, gi, err := member.directory(key).GroupInfo(ctx, ch)
	if err != nil {
		return err
	}
	sig, id, err := joiner.memberKey(ctx)
	if err != nil {
		return err
	}
	gid := channel.GroupID(ch)
	priv, _, err := inviteCredentials(token)
	if err != nil {
		return err
	}
	opts := inviteJoinOptions(priv, gid[:], epoch, id)
	record := opts.Extensions
	opts.Extensions = func(cur []mls.Extension) ([]mls.Extension, error) {
		if next, err := record(cur); err == nil {
			return next, nil
		}
		return cur, nil // nothing left to record: hostile software goes on
	}
	_, err = member.externalCommit(ctx, ch, gi, sig, id, opts)
	return err
}

// LieAtInviteJoin has s join the room ch by the auto invite token as a
// joiner that lies would: it names at the directory the identity named,
// whose key it does not hold, with a proof signed by its own member key,
// and then joins the room by external Commit as its own identity.
func LieAtInviteJoin(s *Seat, ctx context.Context, ch, token, named string) error {
	sig, _, err := s.memberKey(ctx)
	if err != nil {
		return err
	}
	return lieAtInviteJoin(s, ctx, ch, token, named, ed25519.NewKeyFromSeed(sig))
}

// LieAtInviteJoinAs is LieAtInviteJoin naming the did:key of other, a key
// s holds besides its own (a second identity of the same person): the
// directory's check of the proof passes, and the room sees another
// identity join than the one the directory recorded. It returns the
// did:key named.
func LieAtInviteJoinAs(s *Seat, ctx context.Context, ch, token string, other ed25519.PrivateKey) (string, error) {
	named := DIDKey(other.Public().(ed25519.PublicKey))
	return named, lieAtInviteJoin(s, ctx, ch, token, named, other)
}

func lieAtInviteJoin(s *Seat, ctx context.Context, ch, token, named string, signer ed25519.PrivateKey) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	account, err := s.AccountID(ctx)
	if err != nil {
		return err
	}
	_, dirTok, err := inviteCredentials(token)
	if err != nil {
		return err
	}
	proof := SignJoin(signer, account, ch, named, dirTok)
	if _, err := s.directory(key).JoinWith(ctx, ch, dirTok, named, nil, &proof); err != nil {
		return err
	}
	return ForgeInviteJoin(s, s, ctx, ch, token)
}

// RedeemInvite redeems the auto invite token for the room ch at the
// directory, as s's own member identity with its proof, and stops there:
// the join of a joiner that never commits (or has not yet).
func RedeemInvite(s *Seat, ctx context.Context, ch, token string) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	_, dirTok, err := inviteCredentials(token)
	if err != nil {
		return err
	}
	_, id, err := s.memberKey(ctx)
	if err != nil {
		return err
	}
	proof, err := s.joinProof(ctx, ch, id, dirTok)
	if err != nil {
		return err
	}
	_, err = s.directory(key).JoinWith(ctx, ch, dirTok, id, nil, &proof)
	return err
}

// DirectoryToken is the token an auto invite's holder shows the directory.
func DirectoryToken(token string) (string, error) {
	_, dirTok, err := inviteCredentials(token)
	return dirTok, err
}

// PhraseSecrets are what the phrase gives a home that a linked device
// must never hold: the BIP-39 seed, the identity's private key (and its
// seed), and the keys derived from the phrase that are never handed out
// (the local store key, the sync key wrap).
func PhraseSecrets(s *Seat) [][]byte {
	seed, err := s.getSeed()
	if err != nil {
		return nil
	}
	id := seed.Identity().PrivateKey()
	return [][]byte{seed.b[:], id, id.Seed(), seed.derive(labelLocalKey, 32), seed.derive(labelSyncWrap, 32)}
}

// DeviceOffer is a device offer (the SKD1 payload) of s's own device for
// the default suite, made from its home as its software would.
func DeviceOffer(s *Seat, ctx context.Context) ([]byte, error) {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return nil, err
	}
	b, err := mls.NewKeyPackage(Suite, id, sig, s.mlsConfig())
	if err != nil {
		return nil, err
	}
	return append([]byte(deviceOfferMagic), b.Bytes()...), nil
}

// AddToRoom has s commit an Add of the KeyPackage kp in the room name and
// publish the Commit, skipping its own checks of revocations and offers,
// as a hostile or out-of-date member's software would.
func AddToRoom(s *Seat, ctx context.Context, name string, kp []byte) error {
	s.testOnlyNoRevocations = true
	defer func() { s.testOnlyNoRevocations = false }()
	return s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return addMembers(r, kp) })
		return err
	})
}

// APIKeyOf is the API key s keeps ("" if none).
func APIKeyOf(s *Seat, ctx context.Context) string {
	k, _ := s.apiKey(ctx)
	return k
}

// MemberIdentityOf is the member identity s's leaves carry.
func MemberIdentityOf(s *Seat, ctx context.Context) string {
	_, id, _ := s.memberKey(ctx)
	return id
}
