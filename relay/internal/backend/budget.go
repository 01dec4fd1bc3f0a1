package backend

import (
	"encoding/json"
	"strings"
)

// Archive budgets: every payload byte an archive keeps counts against its
// payer's account, org and signup group budgets and the relay's (see
// relay's budget.go for who pays). An archive counts them in Tallies and
// refuses by Limits.

// PayerSep separates the parts of a payer string. Neither the directory's
// org names nor its group ids contain it; claims that do are dropped.
const PayerSep = '\x1f'

// Payer is a payer string split into the keys of its budgets.
type Payer struct {
	Full, Account, Org, Group string
}

// ParsePayer splits p. The org and group are the last two parts, so a
// subject may hold payerSep. An empty org or group (a bare subject has
// both empty) is the account's own: its bytes are those of the payer
// string itself, since an account's org and group never change.
func ParsePayer(p string) Payer {
	pp := Payer{Full: p, Account: p}
	if i := strings.LastIndexByte(p, PayerSep); i >= 0 {
		if j := strings.LastIndexByte(p[:i], PayerSep); j >= 0 {
			pp.Account, pp.Org, pp.Group = p[:j], p[j+1:i], p[i+1:]
		}
	}
	return pp
}

// Budget scopes, the "scope" of a quota_exceeded refusal and the label of
// the budget metrics.
const (
	ScopeAccount = "account"
	ScopeGroup   = "group"
	ScopeOrg     = "org"
	ScopeServer  = "server"
)

// Scopes are the budget scopes, narrowest first.
var Scopes = []string{ScopeAccount, ScopeGroup, ScopeOrg, ScopeServer}

// Limits are the four budgets' sizes in bytes.
type Limits struct {
	Account, Group, Org, Server int64
}

// Tally counts bytes per payer and per budget (payers with their own org
// or group count in payers only). The caller guards it.
type Tally struct {
	Payers  map[string]int64
	Account map[string]int64
	Group   map[string]int64
	Org     map[string]int64
	Total   int64
}

func (t *Tally) groupOf(p Payer) int64 {
	if p.Group == "" {
		return t.Payers[p.Full]
	}
	return t.Group[p.Group]
}

func (t *Tally) orgOf(p Payer) int64 {
	if p.Org == "" {
		return t.Payers[p.Full]
	}
	return t.Org[p.Org]
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{Payers: map[string]int64{}, Account: map[string]int64{}, Group: map[string]int64{}, Org: map[string]int64{}}
}

// Add adds n bytes (negative: gives them back) to p's budgets; a count
// that reaches zero is forgotten.
func (t *Tally) Add(p Payer, n int64) {
	bump(t.Payers, p.Full, n)
	bump(t.Account, p.Account, n)
	if p.Group != "" {
		bump(t.Group, p.Group, n)
	}
	if p.Org != "" {
		bump(t.Org, p.Org, n)
	}
	t.Total = max(t.Total+n, 0)
}

func bump(m map[string]int64, k string, n int64) {
	if v := m[k] + n; v > 0 {
		m[k] = v
	} else {
		delete(m, k)
	}
}

// Refuse reports the narrowest budget n more bytes of p would pass,
// counting what each of ts holds, or "" when they fit.
func (l *Limits) Refuse(p Payer, n int64, ts ...*Tally) string {
	var acc, grp, org, total int64
	for _, t := range ts {
		acc += t.Account[p.Account]
		grp += t.groupOf(p)
		org += t.orgOf(p)
		total += t.Total
	}
	switch {
	case acc+n > l.Account:
		return ScopeAccount
	case grp+n > l.Group:
		return ScopeGroup
	case org+n > l.Org:
		return ScopeOrg
	case total+n > l.Server:
		return ScopeServer
	}
	return ""
}

// BudgetUse is what the metrics show of the budgets: the server's total,
// and per scope the largest user and how many users hold bytes (never who
// they are). Accounts that are their own org or group are not counted as
// one there.
type BudgetUse struct {
	Total   int64
	Largest [3]int64 // account, group, org
	Users   [3]int
}

// Use is the tally's BudgetUse, with what others hold added.
func (t *Tally) Use(others ...*Tally) BudgetUse {
	var u BudgetUse
	for i, pick := range []func(*Tally) map[string]int64{
		func(t *Tally) map[string]int64 { return t.Account },
		func(t *Tally) map[string]int64 { return t.Group },
		func(t *Tally) map[string]int64 { return t.Org },
	} {
		m := pick(t)
		for k, v := range m {
			for _, o := range others {
				v += pick(o)[k]
			}
			u.Largest[i] = max(u.Largest[i], v)
		}
		u.Users[i] = len(m)
	}
	u.Total = t.Total
	for _, o := range others {
		u.Total += o.Total
	}
	return u
}

// QuotaFrame is the refusal of a publish that would pass the budget of
// scope.
func QuotaFrame(scope string) []byte {
	var msg string
	switch scope {
	case ScopeAccount:
		msg = "the account's archive quota is used up; older entries must expire or be evicted first"
	case ScopeGroup:
		msg = "the archive budget of the accounts signed up from this network is used up; older entries must expire or be evicted first"
	case ScopeOrg:
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

// Held returns the bytes the budget of scope holds for key: an account,
// a group or an org (a group or org an account is alone in counts under
// the account's payer string), or the server's for any other scope.
func (t *Tally) Held(scope, key string) int64 {
	switch scope {
	case ScopeAccount:
		return t.Account[key]
	case ScopeGroup:
		return t.Group[key]
	case ScopeOrg:
		return t.Org[key]
	}
	return t.Total
}
