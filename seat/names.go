package seat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Display names. A person may give a name (the "name" setting, which
// `tally config set name` writes). The seat tells each of its rooms in a
// name message, an application message of kind roomName: when the name is
// new to the room, and when a commit brings newcomers, who cannot read
// what came before they joined. Every member keeps the names people gave
// in a room as NoticeName entries of the room's history, written only
// when a person's name changes, and shows them with messages
// ([RoomMessage].SenderName) and members ([RoomMember].Name).
//
// A name is what people call themselves, not proof of who they are: any
// member may give any name, also one another member uses. So a name is
// never shown without the short form of the person's key ([ShortID]).

// roomName is the kind byte of a name message.
const roomName = 0x02

// MaxNameLen is the longest name, in bytes of UTF-8.
const MaxNameLen = 64

// NoticeName: Sender gave the name Text.
const NoticeName = "name"

// SettingName is the setting that holds this person's name.
const SettingName = "name"

// CheckName accepts names others can be shown safely.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) || strings.TrimSpace(name) != name {
		return ErrName
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) {
			return ErrName
		}
	}
	return nil
}

// ShortID is the short form of a person's did:key shown beside names: its
// last 8 characters (base58btc of the key's last bytes).
func ShortID(did string) string {
	did = PersonOf(did)
	if len(did) <= 8 {
		return did
	}
	return did[len(did)-8:]
}

// Name returns this person's name as the home's settings hold it, or "".
// The name is sealed (localseal.go): without the home's seed it is
// ErrNoSeed.
func (s *Seat) Name(ctx context.Context) (string, error) {
	v, err := s.st.setting(ctx, SettingName)
	if errors.Is(err, errNoValue) {
		return "", nil // no name set: nothing to tell
	}
	return v, err
}

// SetName stores this person's name; each room learns it on this seat's
// next command in the room or in a running watch.
func (s *Seat) SetName(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return s.st.setSetting(ctx, SettingName, name)
}

// shareName tells r this person's name if the room has not heard it, or
// if newcomers joined since.
func (s *Seat) shareName(ctx context.Context, r *room) error {
	name, err := s.Name(ctx)
	if err != nil || name == "" || CheckName(name) != nil {
		return err
	}
	if r.nameSent == name && !r.newcomers {
		return nil
	}
	did, err := s.Identity()
	if err != nil {
		return err
	}
	known, err := s.knownName(ctx, r.channel, did)
	if err != nil {
		return err
	}
	r.nameSent = name
	_, err = s.sendInRoom(ctx, r, append([]byte{roomName}, name...), func(seq uint64) []RoomMessage {
		if known == name {
			return nil
		}
		return []RoomMessage{{Room: r.channel, Seq: seq, Sender: did, Kind: NoticeName, Text: name, Time: s.cfg.Now()}}
	})
	if err != nil {
		return fmt.Errorf("seat: telling %s this person's name: %w", r.channel, err)
	}
	r.newcomers = false
	return nil
}

// knownName is the last name person gave in the room, or "".
func (s *Seat) knownName(ctx context.Context, ch, person string) (string, error) {
	names, err := s.roomNames(ctx, ch)
	return names[person], err
}

// roomNames returns the names people gave in the room, by person. The
// senders are sealed (localseal.go), so it opens every name notice of
// the room (one row per change of a name).
func (s *Seat) roomNames(ctx context.Context, ch string) (map[string]string, error) {
	notices, _, err := s.history(ctx, `WHERE channel = ? AND kind = ? ORDER BY seq`, ch, NoticeName)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range notices {
		out[m.Sender] = m.Text
	}
	return out, nil
}

// nameNotice is the history entry a received name message makes: a
// NoticeName when the name is valid and new for its sender, else none.
func (s *Seat) nameNotice(ctx context.Context, m RoomMessage) ([]RoomMessage, error) {
	if CheckName(m.Text) != nil {
		return nil, nil
	}
	known, err := s.knownName(ctx, m.Room, m.Sender)
	if err != nil || known == m.Text {
		return nil, err
	}
	m.Kind = NoticeName
	return []RoomMessage{m}, nil
}

// withNames fills in SenderName of msgs from the names of their rooms.
func (s *Seat) withNames(ctx context.Context, msgs []RoomMessage) error {
	names := map[string]map[string]string{}
	for i := range msgs {
		m := &msgs[i]
		if names[m.Room] == nil {
			n, err := s.roomNames(ctx, m.Room)
			if err != nil {
				return err
			}
			names[m.Room] = n
		}
		if m.Kind == NoticeName {
			// A name applies from its notice on.
			names[m.Room][m.Sender] = m.Text
		}
		m.SenderName = names[m.Room][m.Sender]
	}
	return nil
}
