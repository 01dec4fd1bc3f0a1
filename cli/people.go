package cli

import (
	"errors"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/seat"
)

// whoamiCommand is `tally whoami`.
func whoamiCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "whoami",
		Usage:  "print this home's identity, org, sync channel and servers",
		Action: withSeat(runWhoami),
	}
}

// runWhoami runs `tally whoami`.
func runWhoami(e *env, s *seat.Seat) error {
	did, err := s.Identity()
	if err != nil {
		return err
	}
	org, err := s.Org(e.c.Context)
	if err != nil && !errors.Is(err, seat.ErrNotSignedIn) {
		return err
	}
	var sync string
	if org != "" {
		if sync, err = s.SyncChannel(e.c.Context); err != nil {
			return err
		}
	}
	account, _ := s.AccountID(e.c.Context)
	defAPI, defRelay := defaultURLs()
	if e.json {
		name, _ := s.Name(e.c.Context)
		e.out(map[string]any{"identity": did, "short": shortID(did), "name": name, "org": org, "account_id": account, "sync_channel": sync,
			"api_url": e.apiURL, "relay_url": e.relayURL, "home": e.home}, "")
		return nil
	}
	w := e.c.App.Writer
	name, err := s.Name(e.c.Context)
	if err != nil {
		return err
	}
	showf(w, "identity   %s\n", personLabel(e, did, name))
	if org == "" {
		fmt.Fprintf(w, "org        (not signed in: run `tally signin`)\n")
	} else {
		showf(w, "org        %s\naccount    %s\nsync       %s\n", org, account, sync)
	}
	mark := func(u, def string) string {
		if u == def {
			return u + "  (default)"
		}
		return u
	}
	showf(w, "directory  %s\nrelay      %s\nhome       %s\n", mark(e.apiURL, defAPI), mark(e.relayURL, defRelay), e.home)
	return nil
}

// shortID is the short form of a person that tally shows: the last 8
// characters of the person's did:key ([seat.ShortID]; a device's identity
// shows as its person). The org a signin makes by default ends with the
// same.
func shortID(did string) string { return seat.ShortID(did) }

// displayID is how a person is shown: the short form, or the person's
// whole did:key with --verbose.
func displayID(e *env, did string) string {
	if e.verbose {
		return seat.PersonOf(did)
	}
	return shortID(did)
}

// personLabel is a person as tally shows one: the name they gave, if any,
// always beside the short form of their key (a name is a claim anyone can
// make; the key is not).
func personLabel(e *env, did, name string) string {
	if name == "" {
		return displayID(e, did)
	}
	return name + " (" + displayID(e, did) + ")"
}

// isShortIDOf reports whether s names the person of the member identity
// id: the whole identity, the person's did:key, or its short form.
func isShortIDOf(s, id string) bool {
	return s == id || s == seat.PersonOf(id) || len(s) >= 8 && strings.HasSuffix(seat.PersonOf(id), s)
}

// senderName is how a message's sender is shown: "you" for this person,
// else as room members shows the person.
func senderName(e *env, s *seat.Seat, m seat.RoomMessage) string {
	if me, err := s.Identity(); err == nil && me == seat.PersonOf(m.Sender) {
		return "you"
	}
	return personLabel(e, m.Sender, m.SenderName)
}

// subjectName is how a notice names the person it is about (m.Text):
// "you" for this seat's person, else as members are shown.
func subjectName(e *env, s *seat.Seat, m seat.RoomMessage) string {
	return senderName(e, s, seat.RoomMessage{Room: m.Room, Sender: m.Text})
}

// article is a role with its article: "an admin", "the owner", "a member".
func article(role string) string {
	switch role {
	case seat.RoleAdmin:
		return "an admin"
	case seat.RoleOwner:
		return "the owner"
	}
	return "a " + role
}
