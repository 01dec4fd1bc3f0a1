package seat

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// TestExternalRules: what a room admits from outside, request by request,
// the invite's limits included (invites.go).
func TestExternalRules(t *testing.T) {
	cfg := &mls.Config{ExtensionTypes: []mls.ExtensionType{InvitesExtensionType, legacyInvitesExtensionType}}
	sk, err := mls.GenerateSignatureKey(SuiteClassic)
	if err != nil {
		t.Fatal(err)
	}
	owner := DIDKey(ed25519.PrivateKey(sk).Public().(ed25519.PublicKey))
	kp, err := mls.NewKeyPackage(SuiteClassic, owner, sk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	listed, other, legacy := inviteKey("skt_inv_listed"), inviteKey("skt_inv_other"), inviteKey("skt_inv_legacy")
	pub := func(k ed25519.PrivateKey) []byte { return k.Public().(ed25519.PublicKey) }
	joiner := &mls.Member{Identity: "did:key:joiner", SignatureKey: []byte("joiner key")}
	usedTag := inviteUseTag("did:key:used")
	exts := []mls.Extension{
		{ExtensionType: legacyInvitesExtensionType, ExtensionData: pub(legacy)},
		{ExtensionType: InvitesExtensionType, ExtensionData: marshalInvites([]roomInvite{
			{key: pub(listed), notAfter: uint64(now.Add(time.Hour).Unix()), maxUses: 3, usedBy: [][]byte{usedTag}, barred: [][]byte{inviteUseTag("did:key:removed")}},
		})},
	}
	g, err := mls.NewGroupWithExtensions([]byte("group"), kp, exts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	commit := mls.Sender{SenderType: mls.SenderTypeNewMemberCommit}
	recorded := func(id string) []mls.Extension {
		out, err := recordUse(g.Extensions(), pub(listed), id)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	req := func(j *mls.Member, ad []byte, after []mls.Extension) mls.ExternalRequest {
		return mls.ExternalRequest{GroupID: g.GroupID(), Epoch: g.Epoch(), Sender: commit, Joiner: j, AuthenticatedData: ad, Extensions: after}
	}
	good := inviteTicket(listed, g.GroupID(), g.Epoch(), joiner.Identity)
	if err := externalRules(g, req(joiner, good, recorded(joiner.Identity)), now); err != nil {
		t.Fatalf("a good ticket: %v", err)
	}
	if err := externalRules(g, req(joiner, good, recorded(joiner.Identity)), now.Add(time.Hour+inviteSlack-time.Second)); err != nil {
		t.Fatalf("a good ticket within the slack: %v", err)
	}
	used := &mls.Member{Identity: "did:key:used", SignatureKey: []byte("used key")}
	ownerM := &mls.Member{Identity: owner, SignatureKey: []byte("another key")}
	changed := withExtension(recorded(joiner.Identity), RolesExtensionType, []byte("x"))
	for name, tc := range map[string]struct {
		r    mls.ExternalRequest
		now  time.Time
		want error
	}{
		"no ticket":                 {r: req(joiner, nil, g.Extensions()), want: errNoTicket},
		"a short ticket":            {r: req(joiner, good[:len(good)-1], recorded(joiner.Identity)), want: errNoTicket},
		"an unlisted invite":        {r: req(joiner, inviteTicket(other, g.GroupID(), g.Epoch(), joiner.Identity), g.Extensions()), want: ErrInviteNotAdmitted},
		"a legacy invite":           {r: req(joiner, inviteTicket(legacy, g.GroupID(), g.Epoch(), joiner.Identity), g.Extensions()), want: ErrInviteNotAdmitted},
		"after its lifetime":        {r: req(joiner, good, recorded(joiner.Identity)), now: now.Add(time.Hour + inviteSlack + time.Second), want: ErrInviteExpired},
		"by a person again":         {r: req(used, inviteTicket(listed, g.GroupID(), g.Epoch(), used.Identity), g.Extensions()), want: ErrInviteUsed},
		"by a person removed since": {r: req(&mls.Member{Identity: "did:key:removed"}, inviteTicket(listed, g.GroupID(), g.Epoch(), "did:key:removed"), g.Extensions()), want: ErrRemovedRoom},
		"by a member":               {r: req(ownerM, inviteTicket(listed, g.GroupID(), g.Epoch(), owner), recorded(owner))},
		"the use unrecorded":        {r: req(joiner, good, g.Extensions()), want: errUseUnrecorded},
		"recorded for another":      {r: req(joiner, good, recorded("did:key:someone")), want: errUseUnrecorded},
		"another change too":        {r: req(joiner, good, changed), want: errUseUnrecorded},
		"another identity":          {r: req(joiner, inviteTicket(listed, g.GroupID(), g.Epoch(), "did:key:someone"), recorded(joiner.Identity))},
		"another epoch":             {r: req(joiner, inviteTicket(listed, g.GroupID(), g.Epoch()+1, joiner.Identity), recorded(joiner.Identity))},
		"another group":             {r: req(joiner, inviteTicket(listed, []byte("elsewhere"), g.Epoch(), joiner.Identity), recorded(joiner.Identity))},
		"a proposal":                {r: mls.ExternalRequest{Sender: mls.Sender{SenderType: mls.SenderTypeNewMemberProposal}, Joiner: joiner, AuthenticatedData: good}, want: errNoTicket},
		"no group":                  {r: req(joiner, good, recorded(joiner.Identity)), want: errNoTicket},
		"replacing another":         {r: mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: owner, SignatureKey: joiner.SignatureKey}, Extensions: g.Extensions()}},
		"replacing a new key":       {r: mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: joiner.Identity, SignatureKey: []byte("old key")}, Extensions: g.Extensions()}},
		"a resync that changes":     {r: mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: joiner.Identity, SignatureKey: joiner.SignatureKey}, Extensions: changed}},
	} {
		gg := g
		if name == "no group" {
			gg = nil
		}
		at := tc.now
		if at.IsZero() {
			at = now
		}
		err := externalRules(gg, tc.r, at)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want a refusal (%v)", name, err, tc.want)
		}
	}
	// A member taking its own place again.
	own := mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: joiner.Identity, SignatureKey: joiner.SignatureKey}, Extensions: g.Extensions()}
	if err := externalRules(g, own, now); err != nil {
		t.Fatalf("a resync: %v", err)
	}
}

// TestRecordUse: each use adds the person's tag, the last one drops the
// invite, and the encoding round-trips.
func TestRecordUse(t *testing.T) {
	key := inviteKey("skt_inv_two").Public().(ed25519.PublicKey)
	exts := []mls.Extension{{ExtensionType: InvitesExtensionType, ExtensionData: marshalInvites([]roomInvite{{key: key, notAfter: 99, maxUses: 2}})}}
	once, err := recordUse(exts, key, "did:key:a")
	if err != nil {
		t.Fatal(err)
	}
	es, err := invitesIn(once)
	if err != nil || len(es) != 1 || len(es[0].usedBy) != 1 {
		t.Fatalf("after one use: %+v %v", es, err)
	}
	if _, err := recordUse(once, key, "did:key:a"); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("the same person twice: %v", err)
	}
	twice, err := recordUse(once, key, "did:key:b")
	if err != nil {
		t.Fatal(err)
	}
	if es, err := invitesIn(twice); err != nil || len(es) != 0 {
		t.Fatalf("after the last use: %+v %v", es, err)
	}
	if _, err := recordUse(twice, key, "did:key:c"); !errors.Is(err, ErrInviteNotAdmitted) {
		t.Fatalf("a use beyond max_uses: %v", err)
	}
	barred, changed, err := withBarred(once, []string{"did:key:c"})
	if err != nil || !changed {
		t.Fatalf("barring: %v %v", changed, err)
	}
	if _, err := recordUse(barred, key, "did:key:c"); !errors.Is(err, ErrRemovedRoom) {
		t.Fatalf("a use by a person removed since: %v", err)
	}
	if _, changed, _ := withBarred(barred, []string{"did:key:c"}); changed {
		t.Fatal("barring the same person twice changed the room")
	}
	if _, err := recordUse(barred, key, "did:key:d"); err != nil {
		t.Fatalf("another person's use after a bar: %v", err)
	}
}

// FuzzParseInvites: the invites extension's decoder never panics, and
// what it accepts re-encodes to the same bytes.
func FuzzParseInvites(f *testing.F) {
	key := inviteKey("skt_inv_seed").Public().(ed25519.PublicKey)
	f.Add(marshalInvites(nil))
	f.Add(marshalInvites([]roomInvite{{key: key, notAfter: 1, maxUses: 3, usedBy: [][]byte{inviteUseTag("did:key:a")}, barred: [][]byte{inviteUseTag("did:key:b")}}}))
	f.Add([]byte{2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := parseInvites(data)
		if err != nil {
			return
		}
		if got := marshalInvites(es); string(got) != string(data) {
			t.Fatalf("re-encoded %x, want %x", got, data)
		}
	})
}
