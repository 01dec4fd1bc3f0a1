package seat

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/skytale-oss/skytale/mls"
)

// TestExternalRules: what a room admits from outside, request by request.
func TestExternalRules(t *testing.T) {
	cfg := &mls.Config{ExtensionTypes: []mls.ExtensionType{InvitesExtensionType}}
	sk, err := mls.GenerateSignatureKey(SuiteClassic)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := mls.NewKeyPackage(SuiteClassic, "did:key:owner", sk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	listed, other := inviteKey("skt_inv_listed"), inviteKey("skt_inv_other")
	exts := []mls.Extension{{ExtensionType: InvitesExtensionType, ExtensionData: listed.Public().(ed25519.PublicKey)}}
	g, err := mls.NewGroupWithExtensions([]byte("group"), kp, exts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	joiner := &mls.Member{Identity: "did:key:joiner", SignatureKey: []byte("joiner key")}
	commit := mls.Sender{SenderType: mls.SenderTypeNewMemberCommit}
	req := func(ad []byte) mls.ExternalRequest {
		return mls.ExternalRequest{GroupID: g.GroupID(), Epoch: g.Epoch(), Sender: commit, Joiner: joiner, AuthenticatedData: ad}
	}
	good := inviteTicket(listed, g.GroupID(), g.Epoch(), joiner.Identity)
	if err := externalRules(g, req(good)); err != nil {
		t.Fatalf("a good ticket: %v", err)
	}
	for name, tc := range map[string]struct {
		r    mls.ExternalRequest
		want error
	}{
		"no ticket":           {req(nil), errNoTicket},
		"a short ticket":      {req(good[:len(good)-1]), errNoTicket},
		"an unlisted invite":  {req(inviteTicket(other, g.GroupID(), g.Epoch(), joiner.Identity)), ErrInviteNotAdmitted},
		"another identity":    {req(inviteTicket(listed, g.GroupID(), g.Epoch(), "did:key:someone")), nil},
		"another epoch":       {req(inviteTicket(listed, g.GroupID(), g.Epoch()+1, joiner.Identity)), nil},
		"another group":       {req(inviteTicket(listed, []byte("elsewhere"), g.Epoch(), joiner.Identity)), nil},
		"a proposal":          {mls.ExternalRequest{Sender: mls.Sender{SenderType: mls.SenderTypeNewMemberProposal}, Joiner: joiner, AuthenticatedData: good}, errNoTicket},
		"no group":            {req(good), errNoTicket},
		"replacing another":   {mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: "did:key:owner", SignatureKey: joiner.SignatureKey}}, nil},
		"replacing a new key": {mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: joiner.Identity, SignatureKey: []byte("old key")}}, nil},
	} {
		gg := g
		if name == "no group" {
			gg = nil
		}
		err := externalRules(gg, tc.r)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want a refusal (%v)", name, err, tc.want)
		}
	}
	// A member taking its own place again.
	own := mls.ExternalRequest{Sender: commit, Joiner: joiner, Replaces: &mls.Member{Identity: joiner.Identity, SignatureKey: joiner.SignatureKey}}
	if err := externalRules(g, own); err != nil {
		t.Fatalf("a resync: %v", err)
	}
}
