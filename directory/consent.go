package directory

import (
	"errors"
	"fmt"
)

// consent are the limits that keep a related account from using up a
// person's offers or filling their inbox (Config.ClaimsPerClaimer,
// ClaimsPerDevice, InboxPerSender, InboxSenderBytes, InboxEntries,
// InboxBytes), resolved.
type consent struct {
	claimsPerClaimer, claimsPerDevice int
	inboxPerSender, inboxEntries      int
	inboxSenderBytes, inboxBytes      int64
}

var defaultConsent = consent{
	claimsPerClaimer: ClaimsPerClaimer, claimsPerDevice: ClaimsPerDevice,
	inboxPerSender: MaxInboxPerSender, inboxEntries: MaxInbox,
	inboxSenderBytes: MaxInboxSenderBytes, inboxBytes: MaxInboxBytes,
}

// resolveConsent fills the zero consent fields of cfg with their defaults
// and returns them; a negative one is an error.
func resolveConsent(cfg *Config) (consent, error) {
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"ClaimsPerClaimer", &cfg.ClaimsPerClaimer, ClaimsPerClaimer},
		{"ClaimsPerDevice", &cfg.ClaimsPerDevice, ClaimsPerDevice},
		{"InboxPerSender", &cfg.InboxPerSender, MaxInboxPerSender},
		{"InboxEntries", &cfg.InboxEntries, MaxInbox},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return consent{}, fmt.Errorf("directory: %s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	sizes := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"InboxSenderBytes", &cfg.InboxSenderBytes, MaxInboxSenderBytes},
		{"InboxBytes", &cfg.InboxBytes, MaxInboxBytes},
	}
	for _, f := range sizes {
		if *f.v < 0 {
			return consent{}, fmt.Errorf("directory: %s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if cfg.ClaimsPerClaimer > cfg.ClaimsPerDevice {
		return consent{}, errors.New("directory: ClaimsPerClaimer is more than ClaimsPerDevice, which bounds all claimers together")
	}
	if cfg.InboxPerSender > cfg.InboxEntries || cfg.InboxSenderBytes > cfg.InboxBytes {
		return consent{}, errors.New("directory: a sender's share of an inbox (InboxPerSender, InboxSenderBytes) is more than the inbox (InboxEntries, InboxBytes)")
	}
	return consent{
		claimsPerClaimer: cfg.ClaimsPerClaimer, claimsPerDevice: cfg.ClaimsPerDevice,
		inboxPerSender: cfg.InboxPerSender, inboxEntries: cfg.InboxEntries,
		inboxSenderBytes: cfg.InboxSenderBytes, inboxBytes: cfg.InboxBytes,
	}, nil
}

// sizeText writes n bytes as people read them: whole MiB or KiB when it
// is, else bytes.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
