package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/relay"
)

// The rate limits of tally serve: every token bucket of the directory
// (directory.Limits) is a setting of its own, written BURST/EVERY
// (300/200ms: 300 at once, then one every 200ms), BURST alone (the
// default pace), or off. Like every setting each is a flag, a
// TALLY_SERVE_* variable and a config key; --limits off still turns them
// all off at once.

// rateSetting is one kind of directory request with its buckets.
type rateSetting struct {
	kind string // the flags' middle word
	what string // the requests it counts, for the help text
	rate func(*directory.Limits) *directory.Rate
}

var rateSettings = []rateSetting{
	{kind: "token", what: "sign-ins (POST /v1/tokens)", rate: func(l *directory.Limits) *directory.Rate { return &l.Token }},
	{kind: "channel", what: "channel and seat registrations", rate: func(l *directory.Limits) *directory.Rate { return &l.Channel }},
	{kind: "invite", what: "channel, federation and org invites", rate: func(l *directory.Limits) *directory.Rate { return &l.Invite }},
	{kind: "grant", what: "device grants, their approvals and lookups", rate: func(l *directory.Limits) *directory.Rate { return &l.Grant }},
	{kind: "join", what: "channel joins", rate: func(l *directory.Limits) *directory.Rate { return &l.Join }},
	{kind: "member", what: "member changes, fences and inbox claims", rate: func(l *directory.Limits) *directory.Rate { return &l.Member }},
	{kind: "stock", what: "key-package uploads and claim acknowledgements", rate: func(l *directory.Limits) *directory.Rate { return &l.Stock }},
	{kind: "claim", what: "key-package claims", rate: func(l *directory.Limits) *directory.Rate { return &l.Claim }},
	{kind: "groupinfo", what: "GroupInfo puts", rate: func(l *directory.Limits) *directory.Rate { return &l.GroupInfo }},
	{kind: "tree", what: "ratchet-tree part puts", rate: func(l *directory.Limits) *directory.Rate { return &l.Tree }},
	{kind: "read", what: "reads of blobs and lists", rate: func(l *directory.Limits) *directory.Rate { return &l.Read }},
}

// bucketText is b as a setting.
func bucketText(b directory.Bucket) string {
	e := b.Every.String() // 3m0s, 1h0m0s: written 3m, 1h
	if strings.HasSuffix(e, "m0s") {
		e = strings.TrimSuffix(e, "0s")
	}
	if strings.HasSuffix(e, "h0m") {
		e = strings.TrimSuffix(e, "0m")
	}
	return strconv.Itoa(b.Burst) + "/" + e
}

// parseBucket reads BURST/EVERY, BURST or off; def gives the pace of
// BURST alone.
func parseBucket(s string, def directory.Bucket) (directory.Bucket, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return directory.Bucket{Burst: -1}, nil
	}
	burst, every, paced := strings.Cut(s, "/")
	n, err := strconv.Atoi(strings.TrimSpace(burst))
	if err != nil || n < 1 {
		return directory.Bucket{}, fmt.Errorf("%q is not BURST/EVERY (300/200ms), BURST or off", s)
	}
	b := directory.Bucket{Burst: n, Every: def.Every}
	if paced {
		d, err := time.ParseDuration(strings.TrimSpace(every))
		if err != nil || d <= 0 {
			return directory.Bucket{}, fmt.Errorf("%q: the pace %q is not a positive duration", s, every)
		}
		b.Every = d
	}
	return b, nil
}

// bucketFlag is the flag of one bucket, its default shown.
func bucketFlag(name string, def directory.Bucket, usage string) ucli.Flag {
	return &ucli.StringFlag{Name: name, Value: bucketText(def), Usage: usage + " (`BURST/EVERY`, or off)"}
}

// limitFlags are the flags of the directory's rate limits and read
// bounds and of the relay's per-account and page bounds.
func limitFlags() []ucli.Flag {
	d := directory.DefaultLimits
	fs := []ucli.Flag{
		bucketFlag("signup-per-ip", d.Signup.PerAddr, "signups one address (IPv6: one /64) may make at once, then one per EVERY"),
		bucketFlag("signup-per-net", d.SignupPerNet, "signups one IPv4 /24 or IPv6 /64 may make at once, then one per EVERY"),
	}
	for _, r := range rateSettings {
		def := *r.rate(&d)
		fs = append(fs,
			bucketFlag("directory-rate-"+r.kind+"-per-ip", def.PerAddr, r.what+" one address (IPv6: one /64) may make at once, then one per EVERY"),
			bucketFlag("directory-rate-"+r.kind+"-per-account", def.PerAccount, r.what+" one account may make at once, then one per EVERY"))
	}
	return append(fs,
		&ucli.IntFlag{Name: "directory-open-grants-per-ip", Value: d.OpenGrantsPerAddr, Usage: "device grants one address (IPv6: one /64) may have pending; one more is 429 too_many_grants; 0 for no cap"},
		&ucli.IntFlag{Name: "directory-rate-keys", Value: d.MaxKeys, Usage: "addresses (or accounts) each rate limit tracks at once; past it the least recently seen is forgotten"},
		&ucli.IntFlag{Name: "directory-reads-per-account", Value: d.ReadsPerAccount, Usage: "directory reads of blobs or lists one account may have in flight; more wait a second, then 429; 0 for no bound"},
		&ucli.IntFlag{Name: "directory-read-mib", Value: int(d.ReadBytes >> 20), Usage: "MiB of directory answers in flight on the whole server, each read counted as its 4 MiB page bound; 0 for no bound"},
		&ucli.IntFlag{Name: "relay-conns-per-account", Value: relay.DefaultMaxConnsPerAccount, Usage: "authenticated WebSockets of one account; one more is refused with too_many_connections"},
		&ucli.StringFlag{Name: "relay-page-bytes", Usage: "bytes of one page of GET /v1/messages or /v1/sync (a page always holds at least one entry)", DefaultText: "4MiB"},
	)
}

// limitOptions are the rate limits and bounds of tally serve.
type limitOptions struct {
	// DirectoryLimits are the directory's (zero fields: its defaults).
	DirectoryLimits directory.Limits
	// RelayConnsPerAccount and RelayPageBytes are relay.Config's
	// MaxConnsPerAccount and MaxPageBytes (zero: its defaults).
	RelayConnsPerAccount, RelayPageBytes int
}

// limitFlagsInto reads the limit flags into o.
func (o *serveOptions) limitFlagsInto(c *ucli.Context) error {
	d := directory.DefaultLimits
	l := &o.DirectoryLimits
	bucket := func(name string, def directory.Bucket, into *directory.Bucket) error {
		b, err := parseBucket(c.String(name), def)
		if err != nil {
			return badUsage(fmt.Sprintf("--%s: %v", name, err), "give BURST/EVERY (e.g. 60/1s: 60 at once, then one a second), BURST, or off")
		}
		*into = b
		return nil
	}
	if err := bucket("signup-per-ip", d.Signup.PerAddr, &l.Signup.PerAddr); err != nil {
		return err
	}
	if err := bucket("signup-per-net", d.SignupPerNet, &l.SignupPerNet); err != nil {
		return err
	}
	for _, r := range rateSettings {
		def, into := *r.rate(&d), r.rate(l)
		if err := bucket("directory-rate-"+r.kind+"-per-ip", def.PerAddr, &into.PerAddr); err != nil {
			return err
		}
		if err := bucket("directory-rate-"+r.kind+"-per-account", def.PerAccount, &into.PerAccount); err != nil {
			return err
		}
	}
	// The flags' 0 is "no bound", which directory.Limits spells negative.
	noBound := func(v int) int {
		if v > 0 {
			return v
		}
		return -1
	}
	l.OpenGrantsPerAddr = noBound(c.Int("directory-open-grants-per-ip"))
	l.ReadsPerAccount = noBound(c.Int("directory-reads-per-account"))
	l.ReadBytes = -1
	if v := c.Int("directory-read-mib"); v > 0 {
		l.ReadBytes = int64(v) << 20
	}
	if l.MaxKeys = c.Int("directory-rate-keys"); l.MaxKeys < 1 {
		return badUsage(fmt.Sprintf("--directory-rate-keys %d: it must be positive", l.MaxKeys), "")
	}
	if o.RelayConnsPerAccount = c.Int("relay-conns-per-account"); o.RelayConnsPerAccount < 1 {
		return badUsage(fmt.Sprintf("--relay-conns-per-account %d: it must be positive", o.RelayConnsPerAccount), "")
	}
	if s := c.String("relay-page-bytes"); s != "" {
		n, err := parseSize(s)
		if err != nil || n > 1<<30 {
			return badUsage(fmt.Sprintf("--relay-page-bytes %q: give a size up to 1GiB", s), "e.g. 4MiB")
		}
		o.RelayPageBytes = int(n)
	}
	return nil
}
