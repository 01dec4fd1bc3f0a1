package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/relay"
)

// budgetOptions are tally serve's signup and storage-budget settings.
type budgetOptions struct {
	// Signup is open, invite or closed; "" follows OpenSignup, else the
	// loopback default.
	Signup string
	// The relay's archive budgets in bytes (relay.Config); zero means the
	// relay's default.
	AccountQuota, OrgBudget, GroupBudget, ServerBudget int64
	// The directory's storage budgets in bytes (directory.Config); zero
	// means the directory's default.
	DirAccountBudget, DirGroupBudget, DirOrgBudget, DirServerBudget int64
	// The directory's consent limits (directory.Config); zero means the
	// directory's default.
	ClaimsPerClaimer, ClaimsPerDevice, InboxPerSender, InboxEntries int
	InboxSenderBytes, InboxBytes                                    int64
}

func budgetFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "signup", Usage: "who may create accounts (`MODE`): open (anyone, within the signup limits), invite (an org invite or a signup token from tally serve token), closed (only tally serve account create)", DefaultText: "open when both planes listen on loopback, else closed"},
		&ucli.StringFlag{Name: "relay-account-quota", Usage: "payload bytes one account may keep in the relay's archive (e.g. 256MiB)", DefaultText: "256MiB"},
		&ucli.StringFlag{Name: "relay-group-budget", Usage: "payload bytes the accounts signed up from one IPv4 /24 or IPv6 /64 may keep together", DefaultText: "1GiB, at most a quarter of --relay-server-budget"},
		&ucli.StringFlag{Name: "relay-org-budget", Usage: "payload bytes the accounts of one org may keep together", DefaultText: "half of --relay-server-budget"},
		&ucli.StringFlag{Name: "relay-server-budget", Usage: "payload bytes the relay's archive keeps in all", DefaultText: "half of the data folder's free space plus the archive at start, at most 1TiB"},
		&ucli.StringFlag{Name: "directory-account-budget", Usage: "bytes one account may have the directory keep (key packages, Welcomes, join requests, GroupInfos, trees)", DefaultText: "256MiB, at most --directory-group-budget"},
		&ucli.StringFlag{Name: "directory-group-budget", Usage: "bytes the accounts signed up from one IPv4 /24 or IPv6 /64 may have the directory keep together", DefaultText: "1GiB, at most a quarter of --directory-server-budget"},
		&ucli.StringFlag{Name: "directory-org-budget", Usage: "bytes the accounts of one org may have the directory keep together", DefaultText: "half of --directory-server-budget"},
		&ucli.IntFlag{Name: "directory-claims-per-claimer", Value: directory.ClaimsPerClaimer, Usage: "one-time join offers of one device one account may claim an hour; past it a claim gets the device's last-resort offer"},
		&ucli.IntFlag{Name: "directory-claims-per-device", Value: directory.ClaimsPerDevice, Usage: "one-time join offers of one device all accounts together may claim an hour"},
		&ucli.IntFlag{Name: "directory-inbox-per-sender", Value: directory.MaxInboxPerSender, Usage: "Welcomes one sender may have waiting in one person's inbox"},
		&ucli.StringFlag{Name: "directory-inbox-sender-bytes", Usage: "bytes of Welcomes one sender may have waiting in one person's inbox", DefaultText: "2MiB"},
		&ucli.IntFlag{Name: "directory-inbox-entries", Value: directory.MaxInbox, Usage: "Welcomes one inbox holds"},
		&ucli.StringFlag{Name: "directory-inbox-bytes", Usage: "bytes of Welcomes one inbox holds", DefaultText: "16MiB"},
		&ucli.StringFlag{Name: "directory-server-budget", Usage: "bytes the directory keeps for clients in all", DefaultText: "a quarter of the data folder's free space plus what it stores at start, at most 256GiB; 16GiB with --directory-db postgres://"},
	}
}

// budgetFlagsInto reads the budget flags into o.
func (o *serveOptions) budgetFlagsInto(c *ucli.Context) error {
	o.Signup = c.String("signup")
	switch directory.SignupMode(o.Signup) {
	case "", directory.SignupOpen, directory.SignupInvite, directory.SignupClosed:
	default:
		return badUsage(fmt.Sprintf("--signup %q is not open, invite or closed", o.Signup), "tally serve --signup open|invite|closed")
	}
	if o.Signup != "" && c.IsSet("open-signup") {
		return badUsage("--signup and --open-signup both set", "use --signup alone (--open-signup is the older spelling of --signup open or closed)")
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"relay-account-quota", &o.AccountQuota}, {"relay-group-budget", &o.GroupBudget}, {"relay-org-budget", &o.OrgBudget}, {"relay-server-budget", &o.ServerBudget},
		{"directory-account-budget", &o.DirAccountBudget}, {"directory-group-budget", &o.DirGroupBudget}, {"directory-org-budget", &o.DirOrgBudget}, {"directory-server-budget", &o.DirServerBudget},
		{"directory-inbox-sender-bytes", &o.InboxSenderBytes}, {"directory-inbox-bytes", &o.InboxBytes}} {
		if s := c.String(f.name); s != "" {
			n, err := parseSize(s)
			if err != nil {
				return badUsage(fmt.Sprintf("--%s: %v", f.name, err), "give bytes, or a number with KiB, MiB, GiB or TiB (e.g. 1GiB)")
			}
			*f.v = n
		}
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"directory-claims-per-claimer", &o.ClaimsPerClaimer}, {"directory-claims-per-device", &o.ClaimsPerDevice},
		{"directory-inbox-per-sender", &o.InboxPerSender}, {"directory-inbox-entries", &o.InboxEntries}} {
		if *f.v = c.Int(f.name); *f.v <= 0 {
			return badUsage(fmt.Sprintf("--%s %d: it must be positive", f.name, *f.v), "see `tally serve --help` for the default")
		}
	}
	if o.ClaimsPerClaimer > o.ClaimsPerDevice {
		return badUsage("--directory-claims-per-claimer is more than --directory-claims-per-device", "the per-device limit bounds all claimers together, so it is the larger")
	}
	return nil
}

// signupMode is the signup mode serve runs with: --signup, else the older
// --open-signup, else open when both planes listen on loopback and closed
// otherwise.
func (o *serveOptions) signupMode() directory.SignupMode {
	if o.Signup != "" {
		return directory.SignupMode(o.Signup)
	}
	open := isLoopback(o.APIAddr) && isLoopback(o.RelayAddr)
	if o.OpenSignup != nil {
		open = *o.OpenSignup
	}
	if open {
		return directory.SignupOpen
	}
	return directory.SignupClosed
}

// applyBudgets sets the signup mode and both planes' budgets.
func (o *serveOptions) applyBudgets(dcfg *skytale.DirectoryConfig, rcfg *relay.Config) {
	dcfg.Signup = o.signupMode()
	dcfg.OpenSignup = dcfg.Signup == directory.SignupOpen
	rcfg.AccountQuota, rcfg.GroupBudget, rcfg.OrgBudget, rcfg.ServerBudget = o.AccountQuota, o.GroupBudget, o.OrgBudget, o.ServerBudget
	dcfg.AccountBudget, dcfg.GroupBudget, dcfg.OrgBudget, dcfg.ServerBudget = o.DirAccountBudget, o.DirGroupBudget, o.DirOrgBudget, o.DirServerBudget
	dcfg.ClaimsPerClaimer, dcfg.ClaimsPerDevice = o.ClaimsPerClaimer, o.ClaimsPerDevice
	dcfg.InboxPerSender, dcfg.InboxEntries, dcfg.InboxSenderBytes, dcfg.InboxBytes = o.InboxPerSender, o.InboxEntries, o.InboxSenderBytes, o.InboxBytes
}

// parseSize reads a byte count: digits with an optional binary suffix
// (K, KiB, M, MiB, G, GiB, T, TiB; B for bytes).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	shift := 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}, {"B", 0}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, shift = strings.TrimSpace(v), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a positive size", s)
	}
	return n << shift, nil
}
