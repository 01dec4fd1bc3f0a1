package cli

import (
	"errors"
	"strings"

	"github.com/skytale-oss/skytale/seat"
)

// hintOrErr is err with its hint, for a line that reports it and goes on.
func (e *env) hintOrErr(err error) error {
	if h := e.hint(err); h != nil {
		return h
	}
	return err
}

func (e *env) hint(err error) error {
	if h := e.netHint(err); h != nil {
		return h
	}
	return hint(err)
}

func hint(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, seat.ErrNoSeed):
		return &usageError{"this home has no seat yet (no seed)", "run `tally init` (or, on a new device, `tally signin --link`, or `tally signin --recover` to bring the phrase)"}
	case errors.Is(err, seat.ErrSeedExists):
		return &usageError{"this home already has a seed", "use another --home, or `tally backup` to see it"}
	case errors.Is(err, seat.ErrNotSignedIn):
		return &usageError{"not signed in", "run `tally signin`"}
	case errors.Is(err, seat.ErrSignedIn):
		return &usageError{"this home is already signed in", "use another --home for another account"}
	case errors.Is(err, seat.ErrNoDirectoryURL):
		return &usageError{"no directory URL", "pass --api-url URL, set TALLY_API_URL, or run `tally config set api_url URL`"}
	case errors.Is(err, seat.ErrNoRelayURL):
		return &usageError{"no relay URL", "pass --relay-url URL, set TALLY_RELAY_URL, or run `tally config set relay_url URL`"}
	}
	if errors.Is(err, seat.ErrNotMember) {
		return notAllowed("the relay refused: this account is not a member of the channel ("+err.Error()+")",
			"a channel's owner adds members: rooms by `tally room admit`")
	}
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Code == "revoked" && strings.Contains(ae.Message, "device") || !errors.As(err, &ae) && errors.Is(err, seat.ErrRevoked) {
		return &usageError{"revoked: this device was revoked by its person; it can no longer use the account, and reads nothing sent after the revocation",
			"link it again from a device that holds the identity (`tally signin --link` here, `tally devices approve` there), or recover with the phrase"}
	}
	if !errors.As(err, &ae) && strings.Contains(err.Error(), "subject is revoked") {
		return &usageError{"revoked: the relay refuses this device's credentials (the device or its account was revoked)",
			"see `tally devices list` on a device that holds the identity"}
	}
	if errors.Is(err, seat.ErrNotIdentityHolder) {
		return &usageError{"this device does not hold the identity (it was linked, and holds no phrase)",
			"approve and revoke devices on a device that holds the identity, or recover one with the phrase (`tally signin --recover`)"}
	}
	if errors.Is(err, seat.ErrLinkedHome) {
		return &usageError{"this home is a linked device's and holds no phrase", "use another --home for a phrase"}
	}
	if errors.As(err, &ae) && ae.Code == "revoked" {
		return notAllowed("this account has been revoked at the directory",
			"ask the directory's operator, or sign up again in a new home (`tally --home DIR init`, then `tally signin`)")
	}
	return err
}
