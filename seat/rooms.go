package seat

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/padding"
)

// Rooms are MLS groups (RFC 9420) on relay channels, joined through the
// directory's handshake: a joiner publishes a KeyPackage with an invite
// token, the owner's admit loop adds it with a Commit published to the
// relay and hands the Welcome back through the directory.

// Room message plaintexts start with a kind byte, so cover frames, which
// are real encryptions, can be told apart after decryption only.
const (
	roomCover = 0x00
	roomText  = 0x01
)

// Errors of room operations.
var (
	ErrNoRoom     = errors.New("seat: no such room in this home")
	ErrRoomExists = errors.New("seat: this home already has that room")
	// ErrRoomLive: the room's channel still has other member accounts,
	// so the group this seat made there lives on with them; a new group
	// on the same channel would split the room in two.
	ErrRoomLive = errors.New("seat: the room's channel still has other members")
	ErrNotOwner = errors.New("seat: only the room's owner can do that")
	// ErrNotMember: the relay or the directory refused because this
	// account is not a member of the channel (code not_a_member): the
	// owner has not admitted it yet, or removed it.
	ErrNotMember    = errors.New("seat: this account is not a member of the channel")
	ErrWelcomeWait  = errors.New("seat: the owner has not admitted this seat yet")
	ErrRemovedRoom  = errors.New("seat: this seat was removed from the room")
	ErrNoRooms      = errors.New("seat: this home has no rooms")
	errStaleRetries = errors.New("seat: the room kept moving; try again")
	// errRoomMoved: another process stored a newer state of the room
	// since it was loaded; nothing was stored.
	errRoomMoved = errors.New("seat: the room changed in another process; try again")
)

// RoomError is an error of one room among several (a watch).
type RoomError struct {
	Room string
	Err  error
}

func (e *RoomError) Error() string { return e.Err.Error() + ": " + e.Room }
func (e *RoomError) Unwrap() error { return e.Err }

// RoomMessage is one decrypted room message, or a notice about the room.
type RoomMessage struct {
	Room   string
	Seq    uint64
	Sender string // did: of the sender
	Text   string
	Time   time.Time
	// Kind is "" for a message a member sent, or a notice the seat wrote
	// for a change it saw in the room: NoticeRemoved, NoticeName.
	Kind string
	// SenderName is the name the sender gave in the room (names.go), ""
	// if none.
	SenderName string
	// Role is, in a NoticeRole, the role Text now has.
	Role string
}

// Notices in a room's history.
const (
	// NoticeRemoved: Sender's commit removed this seat from the room; the
	// seat reads nothing of the room after it.
	NoticeRemoved = "removed"

	// Membership notices, for watches: kept in the history table (so a
	// watch learns of the commits another handle of the home made) but
	// left out of RoomHistory and RoomSync. Text is the person (a did:key)
	// the change is about, Sender the member whose commit made it.
	//
	// NoticeJoined: Text came in by a join of its own (an invite).
	NoticeJoined = "joined"
	// NoticeAdded: Sender added Text.
	NoticeAdded = "added"
	// NoticeLeft: Text left the room.
	NoticeLeft = "left"
	// NoticeRemovedMember: Sender removed Text.
	NoticeRemovedMember = "removed-member"
	// NoticeRole: Sender's commit changed the role of Text (now the
	// room's owner, admin or member; see RoomRoles).
	NoticeRole = "role"

	// noticeMembers is the history row of one commit's membership
	// notices.
	noticeMembers = "members"
)

// commitNotices are the membership notices of a commit at seq by
// committer that took r's group from the members before (with the roles
// rolesBefore) to its members now.
func (s *Seat) commitNotices(r *room, seq uint64, at time.Time, committer string, before []mls.Member, leavers []string, rolesBefore RoomRoles) []RoomMessage {
	rolesAfter, _, _ := rolesIn(r.g.Extensions())
	base := RoomMessage{Room: r.channel, Seq: seq, Time: at}
	ns := membershipNotices(base, committer, PersonOf(selfIdentity(r.g)), before, r.g.Members(), leavers, rolesBefore, rolesAfter)
	if len(ns) == 0 {
		return nil
	}
	base.Kind, base.Sender, base.Text = noticeMembers, PersonOf(committer), packNotices(ns)
	return []RoomMessage{base}
}

// noticeEntry is one notice in a noticeMembers row.
type noticeEntry struct {
	Kind string `json:"k"`
	Who  string `json:"w"`
	Role string `json:"r,omitempty"`
}

// packNotices is the text of the history row of one commit's notices (the
// history keeps one row per seq): JSON, since the identities in it are
// the members' own strings, which may hold any character.
func packNotices(ns []RoomMessage) string {
	es := make([]noticeEntry, len(ns))
	for i, n := range ns {
		es[i] = noticeEntry{n.Kind, n.Text, n.Role}
	}
	b, _ := json.Marshal(es)
	return string(b)
}

// leavers are the persons of members whose pending proposals remove
// their own leaf: the commit that takes them is their leaving.
func leavers(g *mls.Group, members []mls.Member) []string {
	var out []string
	for _, p := range g.PendingProposals() {
		if p.Proposal.Remove == nil || p.Sender.SenderType != mls.SenderTypeMember || p.Sender.LeafIndex != p.Proposal.Remove.Removed {
			continue
		}
		for _, m := range members {
			if m.LeafIndex == p.Sender.LeafIndex {
				out = append(out, PersonOf(m.Identity))
			}
		}
	}
	return out
}

// splitNotices turns a noticeMembers row back into its notices.
func splitNotices(m RoomMessage) []RoomMessage {
	var es []noticeEntry
	if json.Unmarshal([]byte(m.Text), &es) != nil {
		return nil
	}
	var out []RoomMessage
	for _, e := range es {
		if !isMembershipNotice(e.Kind) {
			continue
		}
		n := m
		n.Kind, n.Text, n.Role = e.Kind, e.Who, e.Role
		out = append(out, n)
	}
	return out
}

// isMembershipNotice reports whether kind is one of the membership
// notices a watch gets.
func isMembershipNotice(kind string) bool {
	switch kind {
	case NoticeJoined, NoticeAdded, NoticeLeft, NoticeRemovedMember, NoticeRole:
		return true
	}
	return false
}

// membershipNotices are the membership changes a commit by committer made:
// the persons whose last leaf went (left or removed), whose first leaf
// came (joined or added), and whose role changed, in the order of before
// and after. A person who proposed their own removal (leavers) left. self
// is this seat's person, whose own removal is NoticeRemoved instead.
func membershipNotices(base RoomMessage, committer, self string, before, after []mls.Member, leavers []string, rolesBefore, rolesAfter RoomRoles) []RoomMessage {
	persons := func(ms []mls.Member) []string {
		var out []string
		for _, m := range ms {
			if p := PersonOf(m.Identity); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	was, is := persons(before), persons(after)
	by := PersonOf(committer)
	var out []RoomMessage
	note := func(kind, who string) {
		m := base
		m.Kind, m.Text, m.Sender = kind, who, by
		out = append(out, m)
	}
	for _, p := range was {
		switch {
		case slices.Contains(is, p) || p == self:
		case p == by || slices.Contains(leavers, p):
			note(NoticeLeft, p)
		default:
			note(NoticeRemovedMember, p)
		}
	}
	for _, p := range is {
		switch {
		case slices.Contains(was, p):
			if rolesBefore.Owner != "" && rolesBefore.Role(p) != rolesAfter.Role(p) {
				note(NoticeRole, p)
				out[len(out)-1].Role = rolesAfter.Role(p)
			}
		case p == by:
			note(NoticeJoined, p)
		default:
			note(NoticeAdded, p)
		}
	}
	return out
}

// RoomChannel turns a room name into its channel: a bare name means
// <org>/rooms/<name>.
func (s *Seat) RoomChannel(ctx context.Context, name string) (string, error) {
	if !strings.Contains(name, "/") {
		org, err := s.Org(ctx)
		if err != nil {
			return "", err
		}
		name = org + "/rooms/" + name
	}
	if err := channel.Valid(name); err != nil {
		return "", fmt.Errorf("seat: %w", err)
	}
	return name, nil
}

// mlsConfig is roomConfig for a use without a group (KeyPackages).
func (s *Seat) mlsConfig() *mls.Config {
	cfg, _ := s.roomConfig()
	return cfg
}

// groupRef is the group a room's configuration belongs to, set once the
// group exists, for the policies that look at its state.
type groupRef struct{ g *mls.Group }

// roomConfig pads every room message's content to the seat's size
// buckets, authenticates every leaf (validateCredential), enforces the
// room's roles on every Commit (roleRules, see roles.go) and admits from
// outside only what autojoin.go allows. Set the returned ref's group once
// it exists.
func (s *Seat) roomConfig() (*mls.Config, *groupRef) {
	ref := &groupRef{}
	policy := func(c mls.CommitCheck) error {
		if err := roleRules(c); err != nil {
			return err
		}
		if err := s.revocationRules(c); err != nil {
			return err
		}
		if check := s.addCheck; check != nil && !c.ProposalOnly {
			for _, p := range c.Proposals {
				if p.Type == mls.ProposalTypeAdd && p.Added != nil {
					if err := check(p.Added.Identity); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if s.testOnlyNoRoleRules {
		policy = nil
	}
	return &mls.Config{
		ExternalPolicy: func(req mls.ExternalRequest) error { return externalRules(ref.g, req, s.cfg.Now()) },
		// A join by invite records its use in the room (invites.go).
		ExternalCommitExtensions: true,
		Time:                     s.cfg.Now,
		Padding: func(n int) int {
			return padding.Size(n) - padding.HeaderLen - n
		},
		// KeyPackages this seat adds are always checked for lifetime. The
		// leaves already in a room's tree are not: a member who has not
		// committed since joining keeps its KeyPackage's 90-day lifetime in
		// the tree, and checking it would make every later Welcome fail
		// once that lifetime passes (RFC 9420 §7.3 leaves this to the
		// application).
		SkipLifetimeCheck:  true,
		ValidateCredential: validateCredential,
		CommitPolicy:       policy,
		// Every leaf must list the room's extensions for the room to carry
		// them (RFC 9420 §12.1.7 and §13.4).
		ExtensionTypes: []mls.ExtensionType{RolesExtensionType, legacyInvitesExtensionType, InvitesExtensionType},
	}, ref
}

// room is a loaded room.
type room struct {
	channel string
	role    string
	lastSeq uint64
	g       *mls.Group
	version int64 // the stored version this room was loaded from

	// offers: device offers seen since the load (devicerooms.go).
	offers [][]byte
	// gap: since the load, catch-up found entries gone from the relay
	// (rejoin.go).
	gap bool
	// handshake: since the load, a commit or proposal was applied or
	// refused, so a watch's push has something for settle to look at.
	handshake bool
	// onPage, if set, hears the cursor after each page of a catch-up.
	onPage func(seq uint64)
	// refused: since the load, this member refused a handshake entry of
	// its epoch, which may have moved the relay's fence (see settle.go).
	refused bool
	// newcomers: since the load, a commit brought members (names.go).
	newcomers bool
	nameSent  string // the name this seat last told the room
	// inviteJoiners: since the load, the identities that joined by an
	// auto invite, which settle checks against the directory's record
	// (checkInviteJoiners).
	inviteJoiners []string
}

func (s *Seat) loadRoom(ctx context.Context, ch string) (*room, error) {
	r := &room{channel: ch}
	var state, nameSent []byte
	err := s.st.db.QueryRowContext(ctx, `SELECT state, last_seq, role, version, name_sent FROM rooms WHERE channel = ?`, ch).Scan(&state, &r.lastSeq, &r.role, &r.version, &nameSent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoRoom
	}
	if err != nil {
		return nil, err
	}
	l, err := s.sealer()
	if err != nil {
		return nil, err
	}
	if state, err = l.open(sealedRoomState, ch, state); err != nil {
		return nil, err
	}
	if len(nameSent) > 0 {
		if nameSent, err = l.open(sealedNameSent, ch, nameSent); err != nil {
			return nil, err
		}
		r.nameSent = string(nameSent)
	}
	cfg, ref := s.roomConfig()
	if r.g, err = mls.RestoreGroup(state, cfg); err != nil {
		return nil, fmt.Errorf("seat: room state: %w", err)
	}
	ref.g = r.g
	return r, nil
}

// saveRoom writes the group state, the cursor and any history in one
// transaction, so a crash never skips or applies a relay entry twice. The
// update applies only if the stored version is still the one r was loaded
// from: two processes on one home can never both use the same message key.
func (s *Seat) saveRoom(ctx context.Context, r *room, insert bool, history ...RoomMessage) error {
	l, err := s.sealer()
	if err != nil {
		return err
	}
	plain, err := r.g.MarshalBinary()
	if err != nil {
		return err
	}
	state := l.seal(sealedRoomState, r.channel, plain)
	clear(plain)
	var nameSent any = ""
	if r.nameSent != "" {
		nameSent = l.seal(sealedNameSent, r.channel, []byte(r.nameSent))
	}
	tx, err := s.st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if insert {
		_, err = tx.ExecContext(ctx, `INSERT INTO rooms(channel, state, last_seq, role, created_at, suite) VALUES (?, ?, ?, ?, ?, ?)`,
			r.channel, state, r.lastSeq, r.role, s.cfg.Now().UnixMilli(), int(r.g.CipherSuite()))
	} else {
		var res sql.Result
		res, err = tx.ExecContext(ctx, `UPDATE rooms SET state = ?, last_seq = ?, name_sent = ?, version = version + 1
			WHERE channel = ? AND version = ?`, state, r.lastSeq, nameSent, r.channel, r.version)
		if err == nil {
			if n, _ := res.RowsAffected(); n == 0 {
				return errRoomMoved
			}
		}
	}
	if err != nil {
		return err
	}
	for _, m := range history {
		// The sender and text are sealed to the row (localseal.go).
		if _, err := tx.ExecContext(ctx, `INSERT INTO room_history(channel, seq, sender, text, ts, kind, body) VALUES (?, ?, '', '', ?, ?, ?)
			ON CONFLICT DO NOTHING`, m.Room, m.Seq, m.Time.UnixMilli(), m.Kind, l.sealMessage(m)); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if !insert {
		r.version++
	}
	return nil
}

// newRoomChannel returns the channel of a room this home does not have
// yet, and the account key to register or join it with.
func (s *Seat) newRoomChannel(ctx context.Context, name string) (ch, key string, err error) {
	if ch, err = s.RoomChannel(ctx, name); err != nil {
		return "", "", err
	}
	if _, err := s.loadRoom(ctx, ch); err == nil {
		return "", "", ErrRoomExists
	}
	key, err = s.apiKey(ctx)
	return ch, key, err
}

// RoomCreate registers the room's channel and creates its MLS group, with
// this seat as owner and only member, in the suite [Suite].
func (s *Seat) RoomCreate(ctx context.Context, name string) (string, error) {
	return s.RoomCreateWith(ctx, name, RoomOptions{})
}

// RoomCreateWith is [Seat.RoomCreate] with the choices of o.
func (s *Seat) RoomCreateWith(ctx context.Context, name string, o RoomOptions) (string, error) {
	suite := o.Suite
	if suite == 0 {
		suite = Suite
	}
	if err := checkRoomSuite(suite); err != nil {
		return "", err
	}
	s.lockRooms()
	defer s.unlockRooms()
	ch, key, err := s.newRoomChannel(ctx, name)
	if err != nil {
		return "", err
	}
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return "", err
	}
	dir := s.directory(key)
	if err := dir.RegisterChannel(ctx, ch); err != nil {
		return "", err
	}
	if err := s.checkChannelUnused(ctx, dir, ch); err != nil {
		return "", err
	}
	kp, err := mls.NewKeyPackage(suite, id, sig, s.mlsConfig())
	if err != nil {
		return "", err
	}
	gid := channel.GroupID(ch)
	// The creator is the room's owner, with no admins yet (roles.go).
	roles, err := rolesExtension(nil, &RoomRoles{Owner: PersonOf(id)})
	if err != nil {
		return "", err
	}
	cfg, ref := s.roomConfig()
	g, err := mls.NewGroupWithExtensions(gid[:], kp, roles, cfg)
	if err != nil {
		return "", err
	}
	ref.g = g
	// A room created over an existing channel starts after its history.
	r := &room{channel: ch, role: "owner", g: g}
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return "", err
	}
	if r.lastSeq, err = rc.SyncAll(ctx, ch, 0, func(RelayEntry) error { return nil }); err != nil {
		return "", err
	}
	return ch, s.saveRoom(ctx, r, true)
}

// checkChannelUnused refuses to create a group on a channel of this
// account that other accounts are still members of: they are in the group
// this seat made there before (its owner left it with `room leave`, or
// lost its home), and a second group on the channel would split the room
// silently.
func (s *Seat) checkChannelUnused(ctx context.Context, dir *DirectoryClient, ch string) error {
	account, err := s.st.meta(ctx, "account_id")
	if errors.Is(err, errNoValue) {
		return nil // a home from before accounts were kept
	}
	if err != nil {
		return err
	}
	m, err := dir.Members(ctx, ch)
	if err != nil {
		return err
	}
	for _, x := range m.Members {
		if x.AccountID != account {
			return fmt.Errorf("%w (%s)", ErrRoomLive, ch)
		}
	}
	return nil
}

// roomPublisher opens a publisher on the room channel ch.
func (s *Seat) roomPublisher(ctx context.Context, ch string) (*Publisher, error) {
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return nil, err
	}
	return rc.DialPublisher(ctx, ch)
}

func (s *Seat) roomRelay(ctx context.Context) (*RelayClient, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	return s.relay(key), nil
}

// RoomInvite mints an invite token for a room this seat owns. Zero values
// take the directory's defaults (one use, one hour).
func (s *Seat) RoomInvite(ctx context.Context, name string, uses int, ttl time.Duration) (string, error) {
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return "", err
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return "", err
	}
	tok, _, err := s.directory(key).Invite(ctx, ch, uses, int(ttl/time.Second))
	return tok, err
}

// RoomJoin publishes a KeyPackage for the room with an invite token, waits
// up to wait for the owner to admit this seat, and joins from the Welcome.
// If wait passes first it returns ErrWelcomeWait; calling RoomJoin again
// with the same room resumes waiting on the same request.
func (s *Seat) RoomJoin(ctx context.Context, name, token string, wait time.Duration) (string, error) {
	ch, key, err := s.newRoomChannel(ctx, name)
	if err != nil {
		return "", err
	}
	dir := s.directory(key)
	reqID, bundles, err := s.pendingJoin(ctx, ch)
	if errors.Is(err, sql.ErrNoRows) {
		// A room invite token shows the directory a credential derived
		// from it, and keeps the invite key (invites.go).
		inviteKey, dirToken, err := inviteCredentials(token)
		if err != nil {
			return "", err
		}
		// The joiner does not know the room's suite: it offers a
		// KeyPackage of each, and the admitting member picks.
		offer, offered, did, err := s.joinOffer(ctx)
		if err != nil {
			return "", err
		}
		bundles = offered
		proof, err := s.joinProof(ctx, ch, did, dirToken)
		if err != nil {
			return "", err
		}
		ans, err := dir.JoinWith(ctx, ch, dirToken, did, offer, &proof)
		if err != nil {
			return "", err
		}
		if !ans.Auto && strings.HasPrefix(token, roomTokenPrefix) {
			return "", errors.New("seat: the directory took a room invite token for an invite that waits for the owner")
		}
		if ans.Auto {
			// An invite that admits on its own: join by external Commit
			// now (autojoin.go); the offers are not needed.
			var epoch uint64
			if ans.Epoch != nil {
				epoch = *ans.Epoch
			}
			s.lockRooms()
			defer s.unlockRooms()
			return ch, s.joinByInvite(ctx, dir, ch, inviteKey, epoch, ans.GroupInfo)
		}
		reqID = ans.RequestID
		l, err := s.sealer()
		if err != nil {
			return "", err
		}
		priv, err := encodeBundles(bundles)
		if err != nil {
			return "", err
		}
		sealed := l.seal(sealedKeyPackage, reqID, priv)
		clear(priv)
		if _, err := s.st.db.ExecContext(ctx, `INSERT INTO key_packages(request_id, channel, private, created_at) VALUES (?, ?, ?, ?)`,
			reqID, ch, sealed, s.cfg.Now().UnixMilli()); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}

	deadline := time.Now().Add(wait)
	var welcome []byte
	for delay := 100 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		if welcome, err = dir.PollWelcome(ctx, reqID); err != nil {
			return "", err
		}
		if welcome != nil {
			break
		}
		if time.Now().After(deadline) {
			return "", ErrWelcomeWait
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(delay):
		}
	}
	var g *mls.Group
	var lastSeq uint64
	for _, b := range bundles {
		// The Welcome is for the KeyPackage of the room's suite; the
		// others refuse it.
		if g, err = s.joinWelcome(ctx, ch, welcome, b); err == nil || treeTrouble(err) {
			break
		}
	}
	if errors.Is(err, errTreeGone) {
		var r *room
		if r, err = s.joinInPlace(ctx, ch); err == nil {
			g, lastSeq = r.g, r.lastSeq
		}
	}
	if err != nil {
		return "", err
	}
	// Roles this seat cannot read would refuse every later Commit and
	// roster of the room: refuse the room now instead of keeping it.
	if _, _, err := rolesIn(g.Extensions()); err != nil {
		return "", fmt.Errorf("seat: the Welcome to %s carries roles that cannot be read: %w", ch, err)
	}
	r := &room{channel: ch, role: "member", g: g, lastSeq: lastSeq}
	s.lockRooms()
	defer s.unlockRooms()
	if err := s.saveRoom(ctx, r, true); err != nil {
		return "", err
	}
	// The private keys of the KeyPackage are spent (RFC 9420 §16.8).
	s.st.db.ExecContext(ctx, `DELETE FROM key_packages WHERE request_id = ?`, reqID)
	dir.AckWelcome(ctx, reqID)
	return ch, nil
}

// joinProof proves, for a join of ch by invite with the directory token
// dirToken, that this seat holds the member key of identity, the one it
// names there and joins the room as.
func (s *Seat) joinProof(ctx context.Context, ch, identity, dirToken string) (JoinProof, error) {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return JoinProof{}, err
	}
	if id != identity {
		return JoinProof{}, fmt.Errorf("seat: a join names this seat's member identity, not %s", identity)
	}
	account, err := s.AccountID(ctx)
	if err != nil {
		return JoinProof{}, err
	}
	return SignJoin(ed25519.NewKeyFromSeed(sig), account, ch, identity, dirToken), nil
}

func (s *Seat) pendingJoin(ctx context.Context, ch string) (string, []*mls.KeyPackageBundle, error) {
	var id string
	var priv []byte
	err := s.st.db.QueryRowContext(ctx, `SELECT request_id, private FROM key_packages
		WHERE channel = ? AND request_id NOT LIKE 'device:%' AND request_id NOT LIKE 'stock%'`, ch).Scan(&id, &priv)
	if err != nil {
		return "", nil, err
	}
	l, err := s.sealer()
	if err != nil {
		return "", nil, err
	}
	if priv, err = l.open(sealedKeyPackage, id, priv); err != nil {
		return "", nil, err
	}
	bs, err := decodeBundles(priv)
	if err != nil {
		// A home from before join offers kept one bundle, bare.
		var b *mls.KeyPackageBundle
		if b, err = mls.ParseKeyPackageBundle(priv); err == nil {
			bs = []*mls.KeyPackageBundle{b}
		}
	}
	clear(priv)
	return id, bs, err
}

// catchUp processes the room's log since its cursor: commits advance the
// epoch, application messages land in the history. Each entry is applied
// and stored in one transaction.
//
// When the relay no longer holds all that came after the cursor (its cap
// or TTL dropped it), the gap goes into the history as a NoticeGap, and
// settle finds out whether commits were in it (rejoin.go).
func (s *Seat) catchUp(ctx context.Context, r *room, onMsg func(RoomMessage)) error {
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		p, err := rc.SyncPage(ctx, r.channel, r.lastSeq, 500)
		if err != nil {
			return err
		}
		if first && p.Truncated && p.OldestSeq > r.lastSeq+1 {
			// From 0 (a member that joined by Welcome and has read
			// nothing yet) what is gone may all be from before it joined:
			// no notice, but settle checks whether it is behind.
			r.gap = true
			if r.lastSeq > 0 {
				if err := s.noteGap(ctx, r, p.OldestSeq, onMsg); err != nil {
					return err
				}
			}
		}
		for _, e := range p.Entries {
			if err := s.apply(ctx, r, e, onMsg); err != nil {
				return err
			}
		}
		if r.onPage != nil && len(p.Entries) > 0 {
			r.onPage(r.lastSeq)
		}
		if !p.HasMore || len(p.Entries) == 0 {
			break
		}
	}
	if r.g.HasPendingCommit() {
		// An own commit stored before a crash or a lost ack that is not in
		// the log: the relay never recorded it.
		r.g.DiscardCommit()
		return s.saveRoom(ctx, r, false)
	}
	return nil
}

// apply processes one relay entry of the room and stores the result.
// Entries this member cannot use (its own messages coming back, messages
// from before it joined, cover) advance the cursor and change nothing else.
func (s *Seat) apply(ctx context.Context, r *room, e RelayEntry, onMsg func(RoomMessage)) error {
	if e.Seq <= r.lastSeq {
		return nil
	}
	r.lastSeq = e.Seq
	if e.EntryType == EntryWelcome || noteOffer(r, e) {
		return s.saveRoom(ctx, r, false)
	}
	var members int
	var before []mls.Member
	var rolesBefore RoomRoles
	var left []string
	if e.EntryType == EntryCommit {
		r.handshake = true
		before = r.g.Members()
		members = len(before)
		rolesBefore, _, _ = rolesIn(r.g.Extensions())
		left = leavers(r.g, before)
	}
	// The revocation rules judge a Commit by when the relay archived it
	// (revocation.go).
	s.processingAt = time.UnixMilli(e.TS)
	rec, err := r.g.Process(e.Payload)
	s.processingAt = time.Time{}
	if err != nil {
		// Entries this member cannot use only advance the cursor: its own
		// messages coming back, messages from before it joined or past the
		// late-message window, cover it cannot read, and commits that do
		// not verify (hostile or broken; skipping one keeps this member on
		// the epoch it has, and settle sees that the relay's fence may have
		// moved past it). Process changed nothing.
		if e.EntryType == EntryCommit && !errors.Is(err, mls.ErrWrongEpoch) && r.g.Active() {
			r.refused = true
		}
		return s.saveRoom(ctx, r, false)
	}
	var hist []RoomMessage
	switch {
	case rec.Kind == mls.KindApplication && len(rec.Data) > 0 && rec.Data[0] == roomText:
		m := RoomMessage{Room: r.channel, Seq: e.Seq, Sender: PersonOf(rec.SenderIdentity), Text: string(rec.Data[1:]), Time: time.UnixMilli(e.TS)}
		hist = append(hist, m)
	case rec.Kind == mls.KindApplication && len(rec.Data) > 0 && rec.Data[0] == roomName:
		m := RoomMessage{Room: r.channel, Seq: e.Seq, Sender: PersonOf(rec.SenderIdentity), Text: string(rec.Data[1:]), Time: time.UnixMilli(e.TS)}
		if hist, err = s.nameNotice(ctx, m); err != nil {
			return err
		}
	case rec.Kind == mls.KindCommit && rec.Removed:
		hist = append(hist, RoomMessage{Room: r.channel, Seq: e.Seq, Sender: PersonOf(rec.SenderIdentity), Kind: NoticeRemoved,
			Text: "removed this seat from the room", Time: time.UnixMilli(e.TS)})
	case rec.Kind == mls.KindCommit && len(r.g.Members()) > members:
		r.newcomers = true
	}
	if rec.Kind == mls.KindCommit && bytes.HasPrefix(rec.AuthenticatedData, []byte(inviteTicketMagic)) &&
		!slices.ContainsFunc(before, func(m mls.Member) bool { return m.Identity == rec.SenderIdentity }) {
		r.inviteJoiners = append(r.inviteJoiners, rec.SenderIdentity)
	}
	if rec.Kind == mls.KindCommit && r.g.Active() {
		hist = append(hist, s.commitNotices(r, e.Seq, time.UnixMilli(e.TS), rec.SenderIdentity, before, left, rolesBefore)...)
	}
	if err := s.saveRoom(ctx, r, false, hist...); err != nil {
		return err
	}
	for _, m := range hist {
		if onMsg != nil {
			onMsg(m)
		}
	}
	if rec.Kind == mls.KindCommit && !rec.Removed && r.role == "owner" {
		s.endDeparted(ctx, r, before, rec.SenderIdentity)
	}
	return nil
}

// endDeparted is the owner's part in another member's removal of members
// this home did not admit: the commit by committer took the leaves of
// before that are gone from r's group, and only the owner may end, by
// identity, the memberships of the accounts that joined under them
// ([DirectoryClient.RemoveIdentity]; those this home admitted are
// endRemovedMemberships'). Leaves that left by themselves have ended
// theirs already, and the directory then records nothing. It is best
// effort: a failure leaves the membership, which the next removal of the
// same identity retries, while the commit keeps the member out of the
// room.
func (s *Seat) endDeparted(ctx context.Context, r *room, before []mls.Member, committer string) {
	var gone []string
	for _, m := range before {
		if _, ok := r.g.MemberByIdentity(m.Identity); ok || PersonOf(m.Identity) == PersonOf(committer) {
			continue
		}
		var known int
		if err := s.st.db.QueryRowContext(ctx, `SELECT count(*) FROM room_accounts WHERE channel = ? AND identity = ?`, r.channel, m.Identity).Scan(&known); err == nil && known == 0 {
			gone = append(gone, m.Identity)
		}
	}
	if len(gone) == 0 {
		return
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return
	}
	dir := s.directory(key)
	for _, id := range gone {
		dir.RemoveIdentity(ctx, r.channel, id)
	}
}

// publishCommit publishes a commit of r's group, confirming it on success;
// leaving are the persons whose own Remove proposals it takes.
// On stale_epoch it discards the commit, catches up and returns the
// stale error so the caller rebuilds its commit on the new epoch.
func (s *Seat) publishCommit(ctx context.Context, r *room, commit []byte, leaving []string) error {
	conn, err := s.roomPublisher(ctx, r.channel)
	if err != nil {
		r.g.DiscardCommit()
		return err
	}
	defer conn.Close()
	// The state with the pending commit is stored before the commit
	// leaves: if the relay accepts it and this process dies before
	// confirming, the next catch-up finds the commit in the log and
	// confirms it (mls.Group.Process recognizes its own commit); if the
	// relay never recorded it, catch-up discards it.
	if err := s.saveRoom(ctx, r, false); err != nil {
		r.g.DiscardCommit()
		return err
	}
	if testOnlyBeforeCommit != nil {
		testOnlyBeforeCommit()
	}
	seq, err := conn.Publish(ctx, r.channel, commit)
	if err == nil && testOnlyAfterCommit != nil {
		err = testOnlyAfterCommit()
	}
	if err != nil {
		if !errors.Is(err, ErrStaleEpoch) {
			// The relay may or may not have the commit (a lost ack):
			// leave the stored pending commit for catch-up to settle.
			return err
		}
		r.g.DiscardCommit()
		if err := s.saveRoom(ctx, r, false); err != nil {
			return err
		}
		if cerr := s.catchUp(ctx, r, nil); cerr != nil {
			return cerr
		}
		return err
	}
	before := r.g.Members()
	rolesBefore, _, _ := rolesIn(r.g.Extensions())
	if err := r.g.ConfirmCommit(); err != nil {
		return err
	}
	notices := s.commitNotices(r, seq, s.cfg.Now(), selfIdentity(r.g), before, leaving, rolesBefore)
	// Entries between our cursor and our own commit were published before
	// it in the same epoch: catch up on them first (they are application
	// messages of the old epoch, which the window still decrypts).
	if err := s.catchUpTo(ctx, r, seq, nil); err != nil {
		return err
	}
	r.lastSeq = max(r.lastSeq, seq)
	return s.saveRoom(ctx, r, false, notices...)
}

// catchUpTo applies entries up to (not including) seq.
func (s *Seat) catchUpTo(ctx context.Context, r *room, seq uint64, onMsg func(RoomMessage)) error {
	if r.lastSeq+1 >= seq {
		return nil
	}
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return err
	}
	for r.lastSeq+1 < seq {
		page, _, err := rc.Sync(ctx, r.channel, r.lastSeq, 500)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		for _, e := range page {
			if e.Seq >= seq {
				return nil
			}
			if err := s.apply(ctx, r, e, onMsg); err != nil {
				return err
			}
		}
	}
	return nil
}

// testOnlyBeforeCommit, when set by a test, runs before a commit is
// published, so a test can make another member commit first.
var testOnlyBeforeCommit func()

// testOnlyAfterCommit, when set by a test, runs after the relay accepted a
// commit; an error it returns stands for a crash before the commit is
// confirmed.
var testOnlyAfterCommit func() error

// commitWithRetry builds a commit with build, publishes it, and on
// stale_epoch catches up and rebuilds, a few times.
//
// When the relay's fence is ahead of the group (see settle.go), the owner
// resets it and retries until the relay applied the reset; anyone else
// gets ErrFenceAhead.
func (s *Seat) commitWithRetry(ctx context.Context, r *room, build func() (*mls.CommitResult, error)) (*mls.CommitResult, error) {
	var resetAt time.Time
	for attempt := 0; attempt < 5; {
		// Who leaves by this commit is known only before it takes their
		// proposals (the watch's notices).
		leaving := leavers(r.g, r.g.Members())
		res, err := build()
		if err != nil {
			return nil, err
		}
		// A Welcome without the tree is of no use until the tree is at
		// the directory: put it before the Commit leaves, so that a
		// failure here changes nothing (tree.go). It is the tree of the
		// epoch the Commit makes, the one after the group's; a put the
		// directory refuses as stale means the Commit is stale too, which
		// the relay answers below.
		if res.RatchetTree != nil {
			if err := s.putTree(ctx, r.channel, r.g.Epoch()+1, res.TreeHash, res.RatchetTree); err != nil && !treeStale(err) {
				r.g.DiscardCommit()
				return nil, err
			}
		}
		err = s.publishCommit(ctx, r, res.Commit, leaving)
		switch {
		case err == nil:
			if res.Welcome != nil {
				r.newcomers = true
			}
			s.shareGroupInfo(ctx, r)
			return res, nil
		case !errors.Is(err, ErrStaleEpoch):
			return nil, err
		case !fenceAhead(err, r.g):
			attempt++
			continue
		case r.role != "owner":
			return nil, fmt.Errorf("%w (%s)", ErrFenceAhead, r.channel)
		case resetAt.IsZero():
			key, err := s.apiKey(ctx)
			if err != nil {
				return nil, err
			}
			if err := s.directory(key).ResetFence(ctx, r.channel, r.g.Epoch()); err != nil {
				return nil, fmt.Errorf("seat: resetting the relay's commit fence of %s: %w", r.channel, err)
			}
			resetAt = time.Now()
		case time.Since(resetAt) > fenceResetWait:
			return nil, fmt.Errorf("seat: the relay has not applied the commit fence reset of %s yet; try again", r.channel)
		}
		if err := waitFence(ctx); err != nil {
			return nil, err
		}
	}
	return nil, errStaleRetries
}

// Admitted is a join request the owner admitted. AccountID is the
// joiner's directory account when the owner could learn it (see
// [Seat.RoomRemoveMember]).
type Admitted struct {
	RequestID string
	Identity  string
	AccountID string
}

// RoomAdmit admits every pending join request of a room this seat owns,
// one add per commit: the commit goes to the relay first, and the Welcome
// to the directory only once the relay accepted it, so no Welcome is
// published for a commit the relay refused.
func (s *Seat) RoomAdmit(ctx context.Context, name string) ([]Admitted, error) {
	s.lockRooms()
	defer s.unlockRooms()
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return nil, err
	}
	r, err := s.loadRoom(ctx, ch)
	if err != nil {
		return nil, err
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	dir := s.directory(key)
	pending, err := dir.Pending(ctx, ch)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && (ae.Code == "not_owner" || ae.Status == 404) {
			return nil, ErrNotOwner
		}
		return nil, err
	}
	if err := s.catchUp(ctx, r, nil); err != nil {
		return nil, err
	}
	var done []Admitted
	var known map[string]bool // member accounts before this admit
	for _, req := range pending {
		if req.AccountID == "" && known == nil {
			known = s.memberAccounts(ctx, dir, ch)
		}
		res, err := s.admitOffer(ctx, r, req.KeyPackage)
		if err != nil {
			if errors.Is(err, mls.ErrInvalidLeafNode) || errors.Is(err, mls.ErrInvalidProposal) || errors.Is(err, errBadOffer) {
				continue // a bad key package: leave it for the sweep
			}
			return done, err
		}
		if err := dir.PublishWelcome(ctx, req.ID, res.Welcome); err != nil {
			return done, err
		}
		// The directory made the joiner's account a member when the
		// Welcome arrived; remember which account the identity is.
		account := req.AccountID
		if account == "" && known != nil {
			now := s.memberAccounts(ctx, dir, ch)
			account = addedAccount(known, now)
			known = now
		}
		s.rememberAccount(ctx, ch, req.Identity, account)
		done = append(done, Admitted{RequestID: req.ID, Identity: req.Identity, AccountID: account})
	}
	if len(done) > 0 {
		// The newcomers learn this person's name (names.go).
		s.settle(ctx, r)
	}
	return done, nil
}

// admitOffer commits the addition of the joiner whose offer is offer,
// with its KeyPackage of the room's suite (the others fail validation
// without anything being sent).
func (s *Seat) admitOffer(ctx context.Context, r *room, offer []byte) (*mls.CommitResult, error) {
	kps, err := decodeOffer(offer)
	if err != nil {
		return nil, err
	}
	for _, kp := range kps {
		var res *mls.CommitResult
		res, err = s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return addMembers(r, kp) })
		if err == nil || !errors.Is(err, mls.ErrInvalidLeafNode) && !errors.Is(err, mls.ErrInvalidProposal) {
			return res, err
		}
	}
	return nil, err
}

// memberAccounts returns the channel's member accounts, or nil if the
// directory cannot list them.
func (s *Seat) memberAccounts(ctx context.Context, dir *DirectoryClient, ch string) map[string]bool {
	m, err := dir.Members(ctx, ch)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, x := range m.Members {
		out[x.AccountID] = true
	}
	return out
}

// addedAccount is the one account in now that is not in before, or "" if
// there is not exactly one (the joiner's account was a member already, for
// another of its seats, or the list could not be read).
func addedAccount(before, now map[string]bool) string {
	if now == nil {
		return ""
	}
	var added []string
	for a := range now {
		if !before[a] {
			added = append(added, a)
		}
	}
	if len(added) != 1 {
		return ""
	}
	return added[0]
}

// RoomSend sends text to a room and returns its seq.
func (s *Seat) RoomSend(ctx context.Context, name, text string) (uint64, error) {
	// A watch of this home running in another process sends it on its
	// connection, among its cover (handoff.go).
	if seq, ok, err := s.sendViaWatch(ctx, name, text); ok {
		return seq, err
	}
	return s.roomSend(ctx, name, text)
}

// roomSend is RoomSend in this process.
func (s *Seat) roomSend(ctx context.Context, name, text string) (uint64, error) {
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return 0, err
	}
	did, err := s.Identity()
	if err != nil {
		return 0, err
	}
	var seq uint64
	err = s.withRoom(ctx, ch, func(r *room) error {
		// A watch in this process keeps the room caught up by its pushes:
		// a read of the log before the send would tell it from cover.
		if _, watched := s.watchConn(ch); !watched {
			if err := s.catchUpSettled(ctx, r, nil); err != nil {
				return err
			}
		} else if err := s.settle(ctx, r); err != nil {
			return err
		}
		var err error
		seq, err = s.sendInRoom(ctx, r, append([]byte{roomText}, text...), func(seq uint64) []RoomMessage {
			return []RoomMessage{{Room: ch, Seq: seq, Sender: did, Text: text, Time: s.cfg.Now()}}
		})
		return err
	})
	return seq, err
}

// sendInRoom sends plain as an application message of r, which is loaded
// under the room lock and caught up, and returns its seq. Proposals
// pending in the epoch are committed first (settle.go). The history that
// hist returns for the seq is stored with the state once the relay took
// the message.
func (s *Seat) sendInRoom(ctx context.Context, r *room, plain []byte, hist func(seq uint64) []RoomMessage) (uint64, error) {
	if !r.g.Active() {
		return 0, ErrRemovedRoom
	}
	if err := s.commitPending(ctx, r); err != nil {
		return 0, err
	}
	ct, err := r.g.Protect(plain, nil)
	if err != nil {
		return 0, err
	}
	// The advanced ratchet is stored before the message leaves, so a
	// crash cannot make this seat reuse its message key.
	if err := s.saveRoom(ctx, r, false); err != nil {
		return 0, err
	}
	// A watch in this process sends on its connection, as its cover.
	var pub interface {
		Publish(ctx context.Context, channel string, payload []byte) (uint64, error)
	}
	wc, watched := s.watchConn(r.channel)
	if watched {
		pub = wc
	} else {
		p, err := s.roomPublisher(ctx, r.channel)
		if err != nil {
			return 0, err
		}
		defer p.Close()
		pub = p
	}
	seq, err := pub.Publish(ctx, r.channel, ct)
	if err != nil {
		return 0, err
	}
	s.observeSend(r.channel, len(plain))
	if watched {
		// As after a cover frame: no read of the log follows the send
		// (it would mark the frame as a real one). The watch's pushes
		// bring what came before it, and its own message coming back is
		// skipped, so the cursor moves only when nothing is between.
		if r.lastSeq+1 == seq {
			r.lastSeq = seq
		}
		if err := s.saveRoom(ctx, r, false, hist(seq)...); !errors.Is(err, errRoomMoved) {
			return seq, err
		}
	}
	// The message is out: from here on nothing may send it again, so a
	// state another process stored meanwhile is reloaded, not retried.
	for attempt := 0; ; attempt++ {
		// Entries others published after the catch-up and before this
		// message come first.
		err := s.catchUpTo(ctx, r, seq, nil)
		if err == nil {
			r.lastSeq = max(r.lastSeq, seq)
			err = s.saveRoom(ctx, r, false, hist(seq)...)
		}
		if !errors.Is(err, errRoomMoved) {
			return seq, err
		}
		if attempt == 4 {
			return seq, fmt.Errorf("seat: the message was sent (seq %d) but not stored: %v", seq, err)
		}
		fresh, err := s.loadRoom(ctx, r.channel)
		if err != nil {
			return seq, err
		}
		*r = *fresh
	}
}

// RoomSync catches a room up with the relay and returns the new messages.
// They are what entered the room's history meanwhile (notices included),
// read back from it as a watch does.
func (s *Seat) RoomSync(ctx context.Context, name string) ([]RoomMessage, error) {
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []RoomMessage
	f, err := s.newFeed(ctx, []string{ch}, func(m RoomMessage) { out = append(out, m) })
	if err != nil {
		return nil, err
	}
	err = s.withRoom(ctx, ch, func(r *room) error { return s.catchUpSettled(ctx, r, nil) })
	if ferr := f.emit(ctx); err == nil {
		err = ferr
	}
	return out, err
}

// RoomHistory returns the room's stored messages, oldest first.
func (s *Seat) RoomHistory(ctx context.Context, name string) ([]RoomMessage, error) {
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return nil, err
	}
	out, _, err := s.history(ctx, `WHERE channel = ? AND kind <> ? ORDER BY seq`, ch, noticeMembers)
	if err != nil {
		return nil, err
	}
	return out, s.withNames(ctx, out)
}

// history returns the history rows that the clause where (with args)
// selects, opened, and the rowid of the last one. A row that does not
// open fails the whole read: a history with a hole would look complete.
func (s *Seat) history(ctx context.Context, where string, args ...any) ([]RoomMessage, int64, error) {
	l, err := s.sealer()
	if err != nil {
		return nil, 0, err
	}
	rows, err := s.st.db.QueryContext(ctx, `SELECT rowid, channel, seq, ts, kind, body FROM room_history `+where, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []RoomMessage
	var last int64
	var buf openBuf
	for rows.Next() {
		var m RoomMessage
		var ts int64
		var body sql.RawBytes // opened before the next row
		if err := rows.Scan(&last, &m.Room, &m.Seq, &ts, &m.Kind, &body); err != nil {
			return nil, 0, err
		}
		if err := l.openMessage(&m, ts, body, &buf); err != nil {
			return nil, 0, err
		}
		m.Time = time.UnixMilli(ts)
		out = append(out, m)
	}
	return out, last, rows.Err()
}

// RoomMember is one member of a room: one leaf of its group.
type RoomMember struct {
	// Identity is the leaf's member identity, and Person the did:key of
	// the person it names: the same, or the person one of whose devices
	// the leaf is (see [DeviceIdentity]).
	Identity string
	Person   string
	Leaf     uint32
	Self     bool
	// Role is RoleOwner, RoleAdmin or RoleMember, from the roles in the
	// group (roles.go); "" in a room created before rooms had roles.
	Role string
	// Name is the name the person gave in the room, "" if none.
	Name string
}

// RoomMembers catches the room up and returns its roster.
func (s *Seat) RoomMembers(ctx context.Context, name string) ([]RoomMember, uint64, error) {
	var out []RoomMember
	var epoch uint64
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUpSettled(ctx, r, nil); err != nil {
			return err
		}
		if !r.g.Active() {
			return ErrRemovedRoom
		}
		roles, has, err := rolesIn(r.g.Extensions())
		if err != nil {
			return err
		}
		names, err := s.roomNames(ctx, r.channel)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, m := range r.g.Members() {
			rm := RoomMember{Name: names[PersonOf(m.Identity)], Identity: m.Identity, Person: PersonOf(m.Identity), Leaf: m.LeafIndex, Self: m.LeafIndex == r.g.LeafIndex()}
			if has {
				rm.Role = roles.Role(m.Identity)
			}
			out = append(out, rm)
		}
		epoch = r.g.Epoch()
		return nil
	})
	return out, epoch, err
}

// RoomRemove removes the member whose identity is did; see
// [Seat.RoomRemoveMember].
func (s *Seat) RoomRemove(ctx context.Context, name, did string) error {
	_, err := s.RoomRemoveMember(ctx, name, did)
	return err
}

// Removal is what [Seat.RoomRemoveMember] did besides the commit.
type Removal struct {
	// AccountID is the removed identity's directory account, if this home
	// learned it when admitting the identity, or the directory ended the
	// membership of the account that joined under it; "" if not.
	AccountID string
	// MembershipEnded reports that the account's channel membership was
	// ended at the directory, so the relay no longer carries the room's
	// traffic for it.
	MembershipEnded bool
	// OtherSeats reports that the membership was kept because other
	// identities of the same account are still in the room.
	OtherSeats bool
	// OwnerEnds reports that this seat, not the room's owner, removed a
	// member it did not admit: only the owner ends such a membership, and
	// its seat does when it next reads the room.
	OwnerEnds bool
}

// RoomRemoveMember removes the member whose identity is did with a commit,
// then ends its account's channel membership at the directory, unless
// another identity of that account is still in the room. The account is
// the one the directory added when this home admitted the identity
// (the join request names it, or this home saw it appear among the
// channel's members when it published the Welcome); for an identity this
// home did not admit (a join by auto invite, or by another member), the
// directory ends the membership of the accounts that joined under that
// identity ([DirectoryClient.RemoveIdentity]), which only the channel's
// owner may ask. The commit is what cuts the member off from new
// messages; the membership stops the relay from serving it the
// ciphertext, and the directory's record of the removal keeps invites
// made before from readmitting it.
func (s *Seat) RoomRemoveMember(ctx context.Context, name, did string) (Removal, error) {
	var rm Removal
	var ch string
	var remaining, removed []string
	var owner, inGroup bool
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		ch, owner = r.channel, r.role == "owner"
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		removed = removed[:0]
		for _, m := range r.g.Members() {
			if slices.Contains(leavesOf(r.g, did), m.LeafIndex) {
				removed = append(removed, m.Identity)
			}
		}
		inGroup = len(removed) > 0
		if inGroup {
			// Every member refuses a Commit that breaks the room's roles
			// (roles.go); say so before building one.
			if err := checkMayRemove(r.g, did); err != nil {
				return err
			}
		}
		// Out of the group already: an earlier removal whose membership
		// change failed; finish it.
		if !inGroup {
			removed = []string{did}
		} else {
			_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
				leaves := leavesOf(r.g, did)
				if len(leaves) == 0 {
					return nil, fmt.Errorf("seat: %s is not a member of %s", did, r.channel)
				}
				opts := mls.CommitOptions{Remove: leaves}
				if PersonOf(did) != PersonOf(selfIdentity(r.g)) {
					// The person is barred from the invites the room
					// lists now, in the same commit (invites.go).
					exts, changed, err := withBarred(r.g.Extensions(), []string{did})
					if err != nil {
						return nil, err
					}
					if changed {
						opts.Extensions = exts
					}
				}
				return r.g.Commit(opts)
			})
			if err != nil {
				return err
			}
		}
		remaining = remaining[:0]
		for _, m := range r.g.Members() {
			remaining = append(remaining, m.Identity)
		}
		return nil
	})
	if err != nil {
		return rm, err
	}
	err = s.st.db.QueryRowContext(ctx, `SELECT account_id FROM room_accounts WHERE channel = ? AND identity = ?`, ch, did).Scan(&rm.AccountID)
	if errors.Is(err, sql.ErrNoRows) {
		if !owner {
			// Only the owner ends memberships by identity; its seat does
			// when it reads this commit (endDeparted).
			rm.OwnerEnds = true
			return rm, nil
		}
		return s.removeIdentities(ctx, ch, did, removed, inGroup)
	}
	if err != nil {
		return rm, err
	}
	// The other identities recorded for the same account, in one read; a
	// failed read ends nothing rather than guess.
	rows, err := s.st.db.QueryContext(ctx, `SELECT identity FROM room_accounts WHERE channel = ? AND account_id = ? AND identity <> ?`, ch, rm.AccountID, did)
	if err != nil {
		return rm, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return rm, err
		}
		if slices.Contains(remaining, id) {
			rm.OtherSeats = true
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return rm, err
	}
	if !rm.OtherSeats {
		key, err := s.apiKey(ctx)
		if err != nil {
			return rm, err
		}
		if err := s.directory(key).RemoveMember(ctx, ch, rm.AccountID); err != nil {
			return rm, fmt.Errorf("seat: %s is out of the room, but its account's membership of %s could not be ended (remove it again to retry): %w", did, ch, err)
		}
		rm.MembershipEnded = true
	}
	_, err = s.st.db.ExecContext(ctx, `DELETE FROM room_accounts WHERE channel = ? AND identity = ?`, ch, did)
	return rm, err
}

// removeIdentities ends, at the directory, the channel membership of the
// accounts that joined ch under the identities ids, removed from the
// group now (committed) or before, as did.
func (s *Seat) removeIdentities(ctx context.Context, ch, did string, ids []string, committed bool) (Removal, error) {
	var rm Removal
	key, err := s.apiKey(ctx)
	if err != nil {
		return rm, err
	}
	dir := s.directory(key)
	for _, id := range ids {
		ans, err := dir.RemoveIdentity(ctx, ch, id)
		if err != nil {
			return rm, fmt.Errorf("seat: %s is out of the room, but the membership of %s it joined under could not be ended (remove it again to retry): %w", did, ch, err)
		}
		if len(ans.Ended) > 0 {
			rm.AccountID, rm.MembershipEnded = ans.Ended[0], true
		}
		rm.OtherSeats = rm.OtherSeats || ans.Kept
	}
	if !committed && rm.AccountID == "" && !rm.OtherSeats {
		// Neither in the group nor recorded anywhere.
		return rm, fmt.Errorf("seat: %s is not a member of %s", did, ch)
	}
	return rm, nil
}

// rememberAccount records that identity in ch is the directory account
// account (room_accounts), learned when this home admitted it, so that
// removing the identity ends the account's channel membership too
// (RoomRemoveMember, endRemovedMemberships). Every path by which this
// home admits someone by account comes here: a join request admitted, a
// RoomAdd by account, did:key or add-token. Joins by auto invite are
// recorded by the directory instead (channel_identities), and checked by
// the owner's and admins' seats (checkInviteJoiners). Best effort: without
// the record, the removal ends the membership by identity, which only the
// owner may ask.
func (s *Seat) rememberAccount(ctx context.Context, ch, identity, account string) {
	if account == "" {
		return
	}
	s.st.db.ExecContext(ctx, `INSERT INTO room_accounts(channel, identity, account_id) VALUES (?, ?, ?)
		ON CONFLICT (channel, identity) DO UPDATE SET account_id = excluded.account_id`, ch, identity, account)
}

// leavesOf lists the leaves of g that did names, other than this
// member's own: the one leaf whose identity it is, or, for a person's
// did:key, every leaf of that person (see [DeviceIdentity]).
func leavesOf(g *mls.Group, did string) []uint32 {
	var out []uint32
	for _, m := range g.Members() {
		if m.LeafIndex != g.LeafIndex() && (m.Identity == did || PersonOf(m.Identity) == did) {
			out = append(out, m.LeafIndex)
		}
	}
	return out
}

// withNamedRoom runs f on the room called name; see withRoom.
func (s *Seat) withNamedRoom(ctx context.Context, name string, f func(*room) error) error {
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return err
	}
	return s.withRoom(ctx, ch, f)
}

// RoomLeave leaves a room: it proposes the removal of this seat's leaf
// (RFC 9420 §12.1.3; a member cannot commit its own removal), which the
// next owner or admin to see it commits and any member commits before it
// next sends; then it ends this account's membership of the room's
// channel at the directory (so the relay stops carrying the room for it)
// and forgets the room on this seat. Every seat of the account loses the
// relay's service for the room, not only this one. If the relay or the
// directory cannot be reached, the room is kept and the error says why;
// leaving again retries.
//
// The owner cannot leave its room (nobody removes the owner, roles.go):
// for the owner, RoomLeave only forgets the room on this seat, and its
// leaf and its channel membership stay.
func (s *Seat) RoomLeave(ctx context.Context, name string) error {
	s.lockRooms()
	defer s.unlockRooms()
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return err
	}
	var role string
	err = s.st.db.QueryRowContext(ctx, `SELECT role FROM rooms WHERE channel = ?`, ch).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRoom
	}
	if err != nil {
		return err
	}
	if role != "owner" {
		r, err := s.loadRoom(ctx, ch)
		if err != nil {
			return err
		}
		// An account the relay no longer serves the room was removed
		// already, or is leaving again after a failure at the directory.
		if err := s.proposeLeave(ctx, r); err != nil && !errors.Is(err, ErrNotMember) {
			return fmt.Errorf("seat: proposing to leave %s: %w", ch, err)
		}
		if err := s.leaveChannel(ctx, ch); err != nil {
			return err
		}
	}
	res, err := s.st.db.ExecContext(ctx, `DELETE FROM rooms WHERE channel = ?`, ch)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoRoom
	}
	return nil
}

// leaveChannel removes this account from the channel's members. A
// channel or account the directory no longer knows has nothing to leave.
func (s *Seat) leaveChannel(ctx context.Context, ch string) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	account, err := s.st.meta(ctx, "account_id")
	if errors.Is(err, errNoValue) {
		return nil // a home from before accounts were kept: nothing to name
	}
	if err != nil {
		return err
	}
	err = s.directory(key).RemoveMember(ctx, ch, account)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seat: leaving %s at the directory: %w", ch, err)
	}
	return nil
}

// RoomInfo is one room of this home.
type RoomInfo struct {
	Channel string
	Role    string // owner or member
	LastSeq uint64 // the relay cursor this home has processed
	Suite   mls.CipherSuite
}

// RoomSuite returns the cipher suite of a room of this home.
func (s *Seat) RoomSuite(ctx context.Context, name string) (mls.CipherSuite, error) {
	ch, err := s.RoomChannel(ctx, name)
	if err != nil {
		return 0, err
	}
	var cs int
	err = s.st.db.QueryRowContext(ctx, `SELECT suite FROM rooms WHERE channel = ?`, ch).Scan(&cs)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNoRoom
	}
	return mls.CipherSuite(cs), err
}

// Rooms lists this home's rooms by channel.
func (s *Seat) Rooms(ctx context.Context) ([]RoomInfo, error) {
	rows, err := s.st.db.QueryContext(ctx, `SELECT channel, role, last_seq, suite FROM rooms ORDER BY channel`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RoomInfo
	for rows.Next() {
		var r RoomInfo
		var cs int
		if err := rows.Scan(&r.Channel, &r.Role, &r.LastSeq, &cs); err != nil {
			return nil, err
		}
		r.Suite = mls.CipherSuite(cs)
		out = append(out, r)
	}
	return out, rows.Err()
}
