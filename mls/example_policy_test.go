package mls_test

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/skytale-oss/skytale/mls"
)

// An application that lets people join a room on their own (by external
// Commit) only when they were invited, and never lets a joiner replace an
// existing member's leaf. Without an ExternalPolicy, every external Commit
// and every proposal from outside the group is refused.
func ExampleConfig_externalPolicy() {
	cs := mls.MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519
	newMember := func(did string) *mls.KeyPackageBundle {
		sk, err := mls.GenerateSignatureKey(cs)
		if err != nil {
			panic(err)
		}
		kp, err := mls.NewKeyPackage(cs, did, sk, nil)
		if err != nil {
			panic(err)
		}
		return kp
	}
	invited := map[string]bool{"did:key:carol": true}
	cfg := &mls.Config{ExternalPolicy: func(r mls.ExternalRequest) error {
		if r.Sender.SenderType != mls.SenderTypeNewMemberCommit || r.Replaces != nil {
			return errors.New("only fresh joins")
		}
		if !invited[r.Joiner.Identity] {
			return errors.New(r.Joiner.Identity + " is not invited")
		}
		return nil
	}}
	id := sha256.Sum256([]byte("general"))
	alice, err := mls.NewGroup(id[:], newMember("did:key:alice"), cfg)
	if err != nil {
		panic(err)
	}
	for _, did := range []string{"did:key:mallory", "did:key:carol"} {
		gi, err := alice.GroupInfo()
		if err != nil {
			panic(err)
		}
		_, commit, err := mls.JoinExternal(gi, newMember(did), nil, cfg)
		if err != nil {
			panic(err)
		}
		if _, err := alice.Process(commit); err != nil {
			fmt.Println(errors.Is(err, mls.ErrRefusedByPolicy), err)
			continue
		}
		fmt.Println(len(alice.Members()), "members")
	}
	// Output:
	// true mls: refused by the application's policy: did:key:mallory is not invited
	// 2 members
}
