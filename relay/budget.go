package relay

import (
	"path/filepath"
	"strings"

	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// Archive budgets. Every payload byte the archive keeps counts against
// four budgets at once: its account's (Config.AccountQuota), its account's
// org's (OrgBudget), its account's signup group's (GroupBudget: the
// accounts the directory made from one IPv4 /24 or IPv6 /64) and the
// relay's (ServerBudget). A publish that would pass any of them is refused
// with quota_exceeded naming the narrowest one passed, so minting accounts
// buys no disk past the group's and the org's, and no crowd of orgs and
// groups passes the server's.
//
// The relay learns an account's org and group from the token (the org and
// grp claims the directory mints), without asking the directory.
//
// # The channel pays
//
// No entry records who sent it. The bytes of every entry of a channel are
// charged to the channel's payer: the first account to publish on the
// channel (with its org and group), which for a room is its owner, whose
// first commit starts it, and for a seat's sync channel the seat's own
// account. The payer is kept once per channel (the payer column of the
// SQLite archive's channels table; on JetStream the channel's key in
// the payer bucket beside the stream, see package jsarchive). So
// whatever gives an entry's bytes back (the cap, the TTL sweep, a
// restart's recount from the rows) gives them back to the same
// four budgets that were charged, exactly, and the archive never holds a
// link from an entry to the member who sent it. The cost: a member's
// publishes count against the owner's budgets, so an owner vouches, with
// its quota, for the members it admits (and removes one that floods).
// What the relay still learns from live traffic is which authenticated
// connection published when; it keeps none of it (the logs name no one
// unless LogClients). A token without the claims (minted before them)
// makes its account its own org and its own group.

// payerOf is the payer string of entries published with claims: the bare
// subject for a token without org and group (the form entries had before
// the budgets), else subject, org and group joined by payerSep.
func payerOf(c jwt.Claims) string {
	org, grp := c.Org, c.Group
	if strings.IndexByte(org, backend.PayerSep) >= 0 {
		org = ""
	}
	if strings.IndexByte(grp, backend.PayerSep) >= 0 {
		grp = ""
	}
	if org == "" && grp == "" && strings.IndexByte(c.Subject, backend.PayerSep) < 0 {
		return c.Subject
	}
	return c.Subject + string(backend.PayerSep) + org + string(backend.PayerSep) + grp
}

// Defaults of the budgets (Config.ServerBudget, OrgBudget, GroupBudget).
const (
	// DefaultServerBudgetCap caps the default server budget: past a TiB
	// of ciphertext an operator chooses.
	DefaultServerBudgetCap = 1 << 40
	// DefaultMemoryBudget is the default server budget of an archive in
	// memory, where the disk says nothing of what fits.
	DefaultMemoryBudget = 1 << 30
	// DefaultGroupBudget is the default budget of one signup group: the
	// issue's 1 GiB, four accounts' default quotas.
	DefaultGroupBudget = 1 << 30
)

// budgetLimits fills the zero budget fields of cfg with their defaults,
// for an archive that stores stored bytes already, and returns them.
func budgetLimits(cfg *Config, stored int64) backend.Limits {
	if cfg.ServerBudget == 0 {
		cfg.ServerBudget = DefaultMemoryBudget
		if cfg.DBPath != "" {
			if free, ok := datadir.FreeSpace(filepath.Dir(cfg.DBPath)); ok {
				cfg.ServerBudget = min((free+stored)/2, DefaultServerBudgetCap)
			}
		}
		cfg.ServerBudget = max(cfg.ServerBudget, 1)
	}
	setDefault(&cfg.OrgBudget, max(cfg.ServerBudget/2, 1))
	setDefault(&cfg.GroupBudget, max(min(DefaultGroupBudget, cfg.ServerBudget/4), 1))
	return backend.Limits{Account: cfg.AccountQuota, Group: cfg.GroupBudget, Org: cfg.OrgBudget, Server: cfg.ServerBudget}
}
