package relay

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/internal/jwt"
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
// the payer bucket beside the stream, see jetstream.go). So
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

// payerSep separates the parts of a payer string. Neither the directory's
// org names nor its group ids contain it; claims that do are dropped.
const payerSep = '\x1f'

// payerOf is the payer string of entries published with claims: the bare
// subject for a token without org and group (the form entries had before
// the budgets), else subject, org and group joined by payerSep.
func payerOf(c jwt.Claims) string {
	org, grp := c.Org, c.Group
	if strings.IndexByte(org, payerSep) >= 0 {
		org = ""
	}
	if strings.IndexByte(grp, payerSep) >= 0 {
		grp = ""
	}
	if org == "" && grp == "" && strings.IndexByte(c.Subject, payerSep) < 0 {
		return c.Subject
	}
	return c.Subject + string(payerSep) + org + string(payerSep) + grp
}

// payer is a payer string split into the keys of its budgets.
type payer struct {
	full, account, org, group string
}

// parsePayer splits p. The org and group are the last two parts, so a
// subject may hold payerSep. An empty org or group (a bare subject has
// both empty) is the account's own: its bytes are those of the payer
// string itself, since an account's org and group never change.
func parsePayer(p string) payer {
	pp := payer{full: p, account: p}
	if i := strings.LastIndexByte(p, payerSep); i >= 0 {
		if j := strings.LastIndexByte(p[:i], payerSep); j >= 0 {
			pp.account, pp.org, pp.group = p[:j], p[j+1:i], p[i+1:]
		}
	}
	return pp
}

// Budget scopes, the "scope" of a quota_exceeded refusal and the label of
// the budget metrics.
const (
	scopeAccount = "account"
	scopeGroup   = "group"
	scopeOrg     = "org"
	scopeServer  = "server"
)

var budgetScopes = []string{scopeAccount, scopeGroup, scopeOrg, scopeServer}

// limits are the four budgets' sizes in bytes.
type limits struct {
	account, group, org, server int64
}

// tally counts bytes per payer and per budget (payers with their own org
// or group count in payers only). The caller guards it.
type tally struct {
	payers  map[string]int64
	account map[string]int64
	group   map[string]int64
	org     map[string]int64
	total   int64
}

func (t *tally) groupOf(p payer) int64 {
	if p.group == "" {
		return t.payers[p.full]
	}
	return t.group[p.group]
}

func (t *tally) orgOf(p payer) int64 {
	if p.org == "" {
		return t.payers[p.full]
	}
	return t.org[p.org]
}

func newTally() *tally {
	return &tally{payers: map[string]int64{}, account: map[string]int64{}, group: map[string]int64{}, org: map[string]int64{}}
}

// add adds n bytes (negative: gives them back) to p's budgets; a count
// that reaches zero is forgotten.
func (t *tally) add(p payer, n int64) {
	bump(t.payers, p.full, n)
	bump(t.account, p.account, n)
	if p.group != "" {
		bump(t.group, p.group, n)
	}
	if p.org != "" {
		bump(t.org, p.org, n)
	}
	t.total = max(t.total+n, 0)
}

func bump(m map[string]int64, k string, n int64) {
	if v := m[k] + n; v > 0 {
		m[k] = v
	} else {
		delete(m, k)
	}
}

// refuse reports the narrowest budget n more bytes of p would pass,
// counting what each of ts holds, or "" when they fit.
func (l *limits) refuse(p payer, n int64, ts ...*tally) string {
	var acc, grp, org, total int64
	for _, t := range ts {
		acc += t.account[p.account]
		grp += t.groupOf(p)
		org += t.orgOf(p)
		total += t.total
	}
	switch {
	case acc+n > l.account:
		return scopeAccount
	case grp+n > l.group:
		return scopeGroup
	case org+n > l.org:
		return scopeOrg
	case total+n > l.server:
		return scopeServer
	}
	return ""
}

// budgetUse is what the metrics show of the budgets: the server's total,
// and per scope the largest user and how many users hold bytes (never who
// they are). Accounts that are their own org or group are not counted as
// one there.
type budgetUse struct {
	total   int64
	largest [3]int64 // account, group, org
	users   [3]int
}

func (t *tally) use(others ...*tally) budgetUse {
	var u budgetUse
	for i, pick := range []func(*tally) map[string]int64{
		func(t *tally) map[string]int64 { return t.account },
		func(t *tally) map[string]int64 { return t.group },
		func(t *tally) map[string]int64 { return t.org },
	} {
		m := pick(t)
		for k, v := range m {
			for _, o := range others {
				v += pick(o)[k]
			}
			u.largest[i] = max(u.largest[i], v)
		}
		u.users[i] = len(m)
	}
	u.total = t.total
	for _, o := range others {
		u.total += o.total
	}
	return u
}

// quotaFrame is the refusal of a publish that would pass the budget of
// scope.
func quotaFrame(scope string) []byte {
	var msg string
	switch scope {
	case scopeAccount:
		msg = "the account's archive quota is used up; older entries must expire or be evicted first"
	case scopeGroup:
		msg = "the archive budget of the accounts signed up from this network is used up; older entries must expire or be evicted first"
	case scopeOrg:
		msg = "the org's archive budget is used up; older entries must expire or be evicted first"
	default:
		msg = "the relay's archive is full; older entries must expire or be evicted first"
	}
	b, _ := json.Marshal(scopedError{"error", "quota_exceeded", scope, msg})
	return b
}

// scopedError is an error frame that names the budget it is about.
type scopedError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Scope   string `json:"scope"`
	Message string `json:"message"`
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
func budgetLimits(cfg *Config, stored int64) limits {
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
	return limits{account: cfg.AccountQuota, group: cfg.GroupBudget, org: cfg.OrgBudget, server: cfg.ServerBudget}
}
