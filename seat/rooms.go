package seat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	errStaleRetries = errors.New("seat: the room kept moving; try again")
	// errRoomMoved: another process stored a newer state of the room
	// since it was loaded; nothing was stored.
	errRoomMoved = errors.New("seat: the room changed in another process; try again")
)

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

// roomChannel turns a room name into its channel: a bare name means
// <org>/rooms/<name>.
func (s *Seat) roomChannel(ctx context.Context, name string) (string, error) {
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

// RoomInfo is one room of this home.
type RoomInfo struct {
	Channel string
	Role    string // owner or member
	LastSeq uint64 // the relay cursor this home has processed
	Suite   mls.CipherSuite
}

// suiteOf is [Room.Suite] on the room called name.
func (s *Seat) suiteOf(ctx context.Context, name string) (mls.CipherSuite, error) {
	ch, err := s.roomChannel(ctx, name)
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
