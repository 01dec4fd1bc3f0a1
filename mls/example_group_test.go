package mls_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/skytale-oss/skytale/mls"
)

// A room is an MLS group whose id is the SHA-256 of the channel name. The
// owner adds a member, confirms the Commit once the relay accepted it,
// and the member joins from the Welcome.
func ExampleNewGroup() {
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
	id := sha256.Sum256([]byte("general"))
	alice, err := mls.NewGroup(id[:], newMember("did:key:alice"), nil)
	if err != nil {
		panic(err)
	}

	bob := newMember("did:key:bob")
	res, err := alice.AddMembers(bob.Bytes()) // publish bob's KeyPackage, commit
	if err != nil {
		panic(err)
	}
	// ... send res.Commit to the relay; once it is accepted:
	if err := alice.ConfirmCommit(); err != nil {
		panic(err)
	}
	bobGroup, err := mls.Join(res.Welcome, bob, nil, nil)
	if err != nil {
		panic(err)
	}

	msg, err := alice.Protect([]byte("hello, bob"), nil)
	if err != nil {
		panic(err)
	}
	rec, err := bobGroup.Process(msg)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s says %q in epoch %d\n", rec.SenderIdentity, rec.Data, rec.Epoch)
	// Output: did:key:alice says "hello, bob" in epoch 1
}
