package mls

import (
	"bytes"
	"crypto/hpke"
	"crypto/mlkem"
	"crypto/sha3"
	"errors"
	"fmt"
	"slices"
	"testing"
)

const xwing = MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519

func TestXWingSuiteListed(t *testing.T) {
	if xwing != 0x004D {
		t.Fatalf("code point %#04x", uint16(xwing))
	}
	if !slices.Contains(SupportedSuites(), xwing) {
		t.Fatal("not in SupportedSuites")
	}
	if got := xwing.String(); got != "MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519" {
		t.Fatalf("String() = %q", got)
	}
	if !xwing.PostQuantum() || MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519.PostQuantum() {
		t.Fatal("PostQuantum() wrong")
	}
	for _, cs := range SupportedSuites() {
		if _, err := suiteFor(cs); err != nil {
			t.Errorf("listed suite %v: %v", cs, err)
		}
	}
	s, _ := suiteFor(xwing)
	cs := s.(*cipherSuite)
	if cs.kem.ID() != 0x647a || cs.hpkeKDF.ID() != 0x0001 || cs.hpkeAEAD.ID() != 0x0003 || s.hashLen() != 32 {
		t.Fatalf("primitives: KEM %#04x KDF %#04x AEAD %#04x Nh %d", cs.kem.ID(), cs.hpkeKDF.ID(), cs.hpkeAEAD.ID(), s.hashLen())
	}
}

// TestXWingDeriveKeyPair: node keys derive as the X-Wing specification's
// DeriveKeyPair, the private key being SHAKE256(ikm, 32), which is what
// OpenMLS and ts-mls compute; crypto/hpke's own DeriveKeyPair (labelled,
// after draft-ietf-hpke-pq) gives another key, and using it would make
// this engine disagree with them on every path secret.
func TestXWingDeriveKeyPair(t *testing.T) {
	s, _ := suiteFor(xwing)
	ikm := bytes.Repeat([]byte{0x42}, 32)
	priv, pub, err := s.hpkeDeriveKeyPair(ikm)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha3.SumSHAKE256(ikm, 32); !bytes.Equal(priv, want) {
		t.Fatalf("private key %x, want SHAKE256(ikm, 32) = %x", priv, want)
	}
	if len(pub) != xwingPublicKeySize {
		t.Fatalf("public key of %d bytes", len(pub))
	}
	if p, err := s.hpkePublicFromPrivate(priv); err != nil || !bytes.Equal(p, pub) {
		t.Fatal("public key does not follow from the private key")
	}
	labelled, err := hpke.MLKEM768X25519().DeriveKeyPair(ikm)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(labelled.PublicKey().Bytes(), pub) {
		t.Fatal("crypto/hpke DeriveKeyPair now agrees; revisit hpkeDeriveKeyPair")
	}
	// Deterministic, and distinct for distinct secrets.
	_, pub2, _ := s.hpkeDeriveKeyPair(ikm)
	_, pub3, _ := s.hpkeDeriveKeyPair(bytes.Repeat([]byte{0x43}, 32))
	if !bytes.Equal(pub, pub2) || bytes.Equal(pub, pub3) {
		t.Fatal("derivation not a function of the secret")
	}
	// The key works for HPKE both ways.
	kem, ct, err := encryptWithLabel(s, pub, "Test", []byte("ctx"), []byte("path secret"))
	if err != nil {
		t.Fatal(err)
	}
	if len(kem) != xwingCiphertextSize {
		t.Fatalf("kem_output of %d bytes", len(kem))
	}
	if pt, err := decryptWithLabel(s, priv, "Test", []byte("ctx"), kem, ct); err != nil || string(pt) != "path secret" {
		t.Fatalf("decrypt: %q, %v", pt, err)
	}
}

// TestXWingGroupLifecycle runs a group of the suite through creation,
// Welcome (with the tree in the Welcome and out of band), Commits with and
// without a path, Update, Remove, external joins, application messages
// both ways, and a save and restore, in PrivateMessage and PublicMessage
// handshakes.
func TestXWingGroupLifecycle(t *testing.T) {
	for _, public := range []bool{false, true} {
		t.Run(fmt.Sprintf("public=%v", public), func(t *testing.T) {
			cfg := &Config{PublicHandshake: public, ExternalPolicy: admitExternal}
			tg := newSuiteTestGroup(t, xwing, "did:key:alice", cfg)
			alice := tg.members["did:key:alice"]
			if alice.CipherSuite() != xwing {
				t.Fatalf("suite %v", alice.CipherSuite())
			}
			tg.check()
			tg.add("did:key:alice", "did:key:bob")
			tg.add("did:key:bob", "did:key:carol")
			tg.check()

			// A Commit with a path from a member that did not create the group.
			res, err := tg.members["did:key:carol"].SelfUpdate()
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:carol", res)
			tg.check()

			// An Update proposal committed by someone else.
			prop, err := tg.members["did:key:bob"].ProposeUpdate()
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"did:key:alice", "did:key:carol"} {
				if _, err := tg.members[name].Process(prop); err != nil {
					t.Fatal(err)
				}
			}
			res, err = tg.members["did:key:alice"].Commit(CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:alice", res)
			tg.check()

			// External join, then a resync of the same member.
			gi, err := alice.GroupInfo()
			if err != nil {
				t.Fatal(err)
			}
			dave, commit, err := JoinExternal(gi, newSuiteBundle(t, xwing, "did:key:dave"), nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for name, m := range tg.members {
				if _, err := m.Process(commit); err != nil {
					t.Fatalf("%s processing the external commit: %v", name, err)
				}
			}
			tg.members["did:key:dave"] = dave
			tg.check()

			// Out-of-band tree join.
			erin := newSuiteBundle(t, xwing, "did:key:erin")
			res, err = dave.Commit(CommitOptions{Add: [][]byte{erin.Bytes()}, Tree: TreeOutOfBand})
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:dave", res)
			if _, err := Join(res.Welcome, erin, nil, cfg); !errors.Is(err, ErrInvalidWelcome) {
				t.Fatalf("joined without the tree: %v", err)
			}
			g, err := Join(res.Welcome, erin, &JoinOptions{RatchetTree: dave.RatchetTree()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tg.members["did:key:erin"] = g
			tg.check()

			// Remove: the removed member reads nothing after.
			bob := tg.members["did:key:bob"]
			bm, _ := alice.MemberByIdentity("did:key:bob")
			res, err = alice.RemoveMembers(bm.LeafIndex)
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:alice", res)
			if bob.Active() {
				t.Fatal("removed member still active")
			}
			tg.check()
			msg, _ := alice.Protect([]byte("after bob"), nil)
			if _, err := bob.Process(msg); err == nil {
				t.Fatal("removed member read a new message")
			}

			// Save and restore, then go on.
			st, err := tg.members["did:key:carol"].MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			carol, err := RestoreGroup(st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if st2, _ := carol.MarshalBinary(); !bytes.Equal(st, st2) {
				t.Fatal("state does not re-encode identically")
			}
			if carol.CipherSuite() != xwing {
				t.Fatalf("restored suite %v", carol.CipherSuite())
			}
			tg.members["did:key:carol"] = carol
			if rec, err := carol.Process(msg); err != nil || string(rec.Data) != "after bob" {
				t.Fatalf("restored member: %v %v", rec, err)
			}
			res, err = carol.SelfUpdate()
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:carol", res)
			tg.check()
		})
	}
}

// TestXWingSuiteMismatch: a KeyPackage of suite 1 cannot join an X-Wing
// group, nor the reverse, and the group is unchanged.
func TestXWingSuiteMismatch(t *testing.T) {
	tg := newSuiteTestGroup(t, xwing, "did:key:alice", nil)
	alice := tg.members["did:key:alice"]
	before := fingerprint(t, alice)
	if _, err := alice.AddMembers(newTestBundle(t, "did:key:bob").Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
		t.Fatalf("suite 1 KeyPackage in an X-Wing group: %v, want ErrInvalidLeafNode", err)
	}
	expectUnchanged(t, alice, before)
	classic := newTestGroup(t, "did:key:alice", nil).members["did:key:alice"]
	before = fingerprint(t, classic)
	if _, err := classic.AddMembers(newSuiteBundle(t, xwing, "did:key:bob").Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
		t.Fatalf("X-Wing KeyPackage in a suite 1 group: %v, want ErrInvalidLeafNode", err)
	}
	expectUnchanged(t, classic, before)
}

// badXWingKeys returns X-Wing public keys that must be refused, derived
// from the good key pub, by name.
func badXWingKeys(pub []byte) map[string][]byte {
	overModulus := bytes.Clone(pub)
	// The first two 12-bit coefficients of the ML-KEM-768 key become
	// 0xfff, above q = 3329 (FIPS 203, Section 7.2).
	overModulus[0], overModulus[1], overModulus[2] = 0xff, 0xff, 0xff
	lowOrder := bytes.Clone(pub)
	copy(lowOrder[mlkem.EncapsulationKeySize768:], lowOrderX25519)
	return map[string][]byte{
		"short":             pub[:len(pub)-1],
		"long":              append(bytes.Clone(pub), 0),
		"X25519 alone":      pub[mlkem.EncapsulationKeySize768:],
		"ML-KEM modulus":    overModulus,
		"X25519 low order":  lowOrder,
		"empty":             nil,
		"ML-KEM-768 alone":  pub[:mlkem.EncapsulationKeySize768],
		"all zero X25519":   append(bytes.Clone(pub[:mlkem.EncapsulationKeySize768]), make([]byte, 32)...),
		"all zero ML-KEM":   append(make([]byte, mlkem.EncapsulationKeySize768), pub[mlkem.EncapsulationKeySize768:]...),
		"DHKEM X25519 size": make([]byte, 32),
	}
}

func TestXWingPublicKeyChecks(t *testing.T) {
	s, _ := suiteFor(xwing)
	_, pub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.checkHPKEPublicKey(pub); err != nil {
		t.Fatalf("fresh key refused: %v", err)
	}
	for name, bad := range badXWingKeys(pub) {
		// "all zero ML-KEM" is a valid ML-KEM key (every coefficient 0 is
		// below q): the check is the standard's, not a heuristic.
		err := s.checkHPKEPublicKey(bad)
		if name == "all zero ML-KEM" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, errInvalidPublicKey) {
			t.Errorf("%s: %v, want errInvalidPublicKey", name, err)
		}
	}
	// Each refusal is one crypto/hpke would also make, or one that would
	// make encapsulation fail: no key the check admits fails to encrypt.
	for name, bad := range badXWingKeys(pub) {
		if s.checkHPKEPublicKey(bad) != nil {
			continue
		}
		if _, _, err := s.hpkeSeal(bad, nil, nil, []byte("x")); err != nil {
			t.Errorf("%s: admitted but HPKE fails: %v", name, err)
		}
	}

	kem, _, err := s.hpkeSeal(pub, nil, nil, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.checkKEMOutput(kem); err != nil {
		t.Fatalf("genuine kem_output refused: %v", err)
	}
	lowCT := bytes.Clone(kem)
	copy(lowCT[xwingCiphertextSize-32:], lowOrderX25519)
	for name, bad := range map[string][]byte{
		"short": kem[:len(kem)-1], "long": append(bytes.Clone(kem), 0), "public key": pub, "X25519 low order": lowCT,
	} {
		if err := s.checkKEMOutput(bad); !errors.Is(err, errInvalidPublicKey) {
			t.Errorf("kem_output %s: %v, want errInvalidPublicKey", name, err)
		}
	}
}

// TestXWingRejectBadKeyPackageKeys: a KeyPackage whose init_key or leaf
// encryption_key is not a usable X-Wing key is refused by the member
// adding it and by a member receiving it in a proposal, and changes
// nothing; the group goes on committing.
func TestXWingRejectBadKeyPackageKeys(t *testing.T) {
	tg := newSuiteTestGroup(t, xwing, "did:key:alice", &Config{PublicHandshake: true})
	tg.add("did:key:alice", "did:key:bob")
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	for _, which := range []string{"encryption_key", "init_key"} {
		good := newSuiteBundle(t, xwing, "did:key:mallory")
		for name, bad := range badXWingKeys(good.kp.InitKey) {
			if name == "all zero ML-KEM" {
				continue
			}
			t.Run(which+"/"+name, func(t *testing.T) {
				b := newSuiteBundle(t, xwing, "did:key:mallory")
				if which == "init_key" {
					b.kp.InitKey = bytes.Clone(bad)
				} else {
					b.kp.LeafNode.EncryptionKey = bytes.Clone(bad)
				}
				resignBundle(t, b)
				beforeA := fingerprint(t, alice)
				if _, err := alice.AddMembers(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
					t.Fatalf("AddMembers: %v, want ErrInvalidLeafNode", err)
				}
				expectUnchanged(t, alice, beforeA)
				msg := signedProposal(t, alice, &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: b.kp}})
				before := fingerprint(t, bob)
				if _, err := bob.Process(msg); !errors.Is(err, ErrInvalidLeafNode) {
					t.Fatalf("Process of the Add: %v, want ErrInvalidLeafNode", err)
				}
				expectUnchanged(t, bob, before)
			})
		}
	}
	res, err := bob.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:bob", res)
	tg.check()
}

// TestXWingRejectBadTreeKeys covers the other places a received X-Wing key
// or ciphertext enters: the node keys and kem_outputs of an UpdatePath,
// the parent keys of a ratchet tree, external_pub and the kem_output of
// an ExternalInit.
func TestXWingRejectBadTreeKeys(t *testing.T) {
	tg := newSuiteTestGroup(t, xwing, "did:key:alice", nil)
	tg.add("did:key:alice", "did:key:bob")
	tg.add("did:key:alice", "did:key:carol")
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	s := alice.s
	_, goodPub, _ := s.hpkeGenerateKeyPair()
	badKey := badXWingKeys(goodPub)["ML-KEM modulus"]

	newPath := func(t *testing.T) *updatePath {
		tree := alice.cur.tree.clone()
		res, err := tree.generateUpdatePath(alice.priv, nil, alice.sigPriv, alice.cur.ctx.GroupID, nil, func([]byte) ([]byte, error) {
			return marshal(alice.cur.ctx), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.path
	}
	t.Run("UpdatePath node", func(t *testing.T) {
		path := newPath(t)
		if err := bob.cur.tree.clone().mergeUpdatePath(alice.own, path); err != nil {
			t.Fatalf("genuine path: %v", err)
		}
		if n := len(path.Nodes[0].EncryptedPathSecret[0].KEMOutput); n != xwingCiphertextSize {
			t.Fatalf("kem_output of %d bytes", n)
		}
		path.Nodes[0].EncryptionKey = bytes.Clone(badKey)
		if err := bob.cur.tree.clone().mergeUpdatePath(alice.own, path); err == nil {
			t.Fatal("update path with a bad node key merged")
		}
	})
	t.Run("UpdatePath kem_output", func(t *testing.T) {
		for _, mutate := range []func([]byte) []byte{
			func(k []byte) []byte { return k[:len(k)-1] },
			func(k []byte) []byte { copy(k[xwingCiphertextSize-32:], lowOrderX25519); return k },
		} {
			path := newPath(t)
			ct := &path.Nodes[0].EncryptedPathSecret[0]
			ct.KEMOutput = mutate(bytes.Clone(ct.KEMOutput))
			if err := bob.cur.tree.clone().mergeUpdatePath(alice.own, path); err == nil {
				t.Fatal("update path with a bad kem_output merged")
			}
		}
	})
	t.Run("tree parent", func(t *testing.T) {
		tree := bob.cur.tree.clone()
		if err := tree.validateStructure(); err != nil {
			t.Fatal(err)
		}
		x := tree.rootIndex()
		if tree.node(x).Parent == nil {
			t.Fatal("root is blank")
		}
		pn := *tree.node(x).Parent
		pn.EncryptionKey = bytes.Clone(badKey)
		tree.setNode(x, treeNode{Parent: &pn})
		if err := tree.validateStructure(); err == nil {
			t.Fatal("tree with a bad parent key validated")
		}
	})
	t.Run("external_pub", func(t *testing.T) {
		if _, _, err := externalInitSender(s, badKey); err == nil {
			t.Fatal("bad external_pub accepted")
		}
	})
	t.Run("ExternalInit kem_output", func(t *testing.T) {
		priv, pub, err := alice.keys.externalKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		kem, init, err := externalInitSender(s, pub)
		if err != nil {
			t.Fatal(err)
		}
		got, err := externalInitReceiver(s, priv, kem)
		if err != nil || !bytes.Equal(got.secret, init.secret) {
			t.Fatalf("genuine external init: %v", err)
		}
		low := bytes.Clone(kem)
		copy(low[xwingCiphertextSize-32:], lowOrderX25519)
		for _, bad := range [][]byte{kem[:100], low, pub} {
			if _, err := externalInitReceiver(s, priv, bad); err == nil {
				t.Fatalf("kem_output of %d bytes accepted", len(bad))
			}
		}
	})
}

// TestXWingTenThousandMembersFitCodec: the ratchet tree of a group of
// 10,000 members of the X-Wing suite with every parent node set (the
// largest vector such a group sends: in a Welcome's GroupInfo, out of
// band, and in a saved state) decodes under the codec's vector cap, with
// room for the GroupInfo and Welcome around it. At the former cap of
// 16 MiB it did not: a group of about 6,300 such members was the most
// whose Welcomes and saved states could be read back.
func TestXWingTenThousandMembersFitCodec(t *testing.T) {
	tg := newSuiteTestGroup(t, xwing, "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", nil)
	tg.add("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doL")
	tg.add("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doM")
	a := tg.members["did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"]
	src := a.cur.tree
	// Node 1 is the parent of leaves 0 and 1, below the root: it carries
	// a parent_hash, as all but one parent of a large tree do.
	leaf, parent := src.node(0), src.node(1)
	if leaf.Leaf == nil || parent.Parent == nil || len(parent.Parent.ParentHash) == 0 {
		t.Fatal("template nodes missing")
	}
	const members = 10000
	big := &ratchetTree{s: src.s}
	big.setWidth(int(nodeWidth(members)))
	for i := range big.width() {
		p, j := big.writable(nodeIndex(i))
		if i%2 == 0 {
			p.nodes[j] = leaf
		} else {
			p.nodes[j] = parent
		}
	}
	enc := big.encode()
	t.Logf("ratchet tree of %d X-Wing members, every parent set: %d bytes (%d per member)", members, len(enc), len(enc)/members)
	if len(enc) <= 1<<24 {
		t.Fatalf("tree of %d bytes: the premise (over 16 MiB) no longer holds", len(enc))
	}
	if len(enc)+1<<20 > maxVectorLen {
		t.Fatalf("tree of %d bytes leaves no room under the cap of %d", len(enc), maxVectorLen)
	}
	got, err := decodeRatchetTree(src.s, enc)
	if err != nil {
		t.Fatal(err)
	}
	if got.memberCount() != members {
		t.Fatalf("decoded %d leaves", got.memberCount())
	}
	// Wrapped as the ratchet_tree extension of a GroupInfo, it still
	// decodes.
	ext := marshal(&Extension{ExtensionType: ExtensionTypeRatchetTree, ExtensionData: enc})
	var e Extension
	if err := unmarshal(ext, &e); err != nil || len(e.ExtensionData) != len(enc) {
		t.Fatalf("extension: %v", err)
	}
}

// FuzzXWingKeyChecks: the checks of received X-Wing keys and ciphertexts
// admit nothing that then breaks: HPKE encryption to an admitted public
// key succeeds, and decapsulation of an admitted kem_output succeeds (only
// the AEAD may then fail). A key admitted here and unusable later would
// stop every member from committing.
func FuzzXWingKeyChecks(f *testing.F) {
	s, _ := suiteFor(xwing)
	priv, pub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		f.Fatal(err)
	}
	kem, _, err := s.hpkeSeal(pub, nil, nil, []byte("x"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pub)
	f.Add(kem)
	for _, bad := range badXWingKeys(pub) {
		f.Add(bad)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) >= mlkem.EncapsulationKeySize768 {
			ek := in[:mlkem.EncapsulationKeySize768]
			_, err := mlkem.NewEncapsulationKey768(ek)
			if mlkem768KeyCheck(ek) != (err == nil) {
				t.Fatalf("modulus check %v, crypto/mlkem %v", mlkem768KeyCheck(ek), err)
			}
		}
		if s.checkHPKEPublicKey(in) == nil {
			if _, _, err := s.hpkeSeal(in, nil, nil, []byte("x")); err != nil {
				t.Fatalf("admitted public key fails HPKE: %v", err)
			}
		}
		if s.checkKEMOutput(in) == nil {
			_, err := s.hpkeOpen(priv, in, nil, nil, []byte("sixteen-byte tag"))
			if err == nil || err.Error() != "mls: HPKE decryption failed" {
				t.Fatalf("admitted kem_output: %v, want only the AEAD to fail", err)
			}
		}
	})
}

// TestMLKEM768KeyCheck: the modulus check accepts exactly what
// crypto/mlkem.NewEncapsulationKey768 accepts: fresh keys, and keys with
// each coefficient set to q-1, yes; with any one coefficient at q or
// above, or of another length, no.
func TestMLKEM768KeyCheck(t *testing.T) {
	agree := func(ek []byte) bool {
		_, err := mlkem.NewEncapsulationKey768(ek)
		return mlkem768KeyCheck(ek) == (err == nil)
	}
	dk, err := mlkem.GenerateKey768()
	if err != nil {
		t.Fatal(err)
	}
	ek := dk.EncapsulationKey().Bytes()
	if !mlkem768KeyCheck(ek) {
		t.Fatal("fresh key refused")
	}
	// set writes the 12-bit coefficient i of the encoded polynomials.
	set := func(k []byte, i int, v uint16) {
		j := i / 2 * 3
		if i%2 == 0 {
			k[j] = byte(v)
			k[j+1] = k[j+1]&0xf0 | byte(v>>8)
		} else {
			k[j+1] = k[j+1]&0x0f | byte(v<<4)
			k[j+2] = byte(v >> 4)
		}
	}
	for i := 0; i < 3*256; i++ {
		for _, v := range []uint16{3328, 3329, 4095} {
			k := bytes.Clone(ek)
			set(k, i, v)
			if want := v < 3329; mlkem768KeyCheck(k) != want {
				t.Fatalf("coefficient %d = %d: check %v, want %v", i, v, !want, want)
			}
			if !agree(k) {
				t.Fatalf("coefficient %d = %d: disagrees with crypto/mlkem", i, v)
			}
		}
	}
	for _, k := range [][]byte{nil, ek[:len(ek)-1], append(bytes.Clone(ek), 0), make([]byte, len(ek)), bytes.Repeat([]byte{0xff}, len(ek))} {
		if !agree(k) {
			t.Fatalf("key of %d bytes: disagrees with crypto/mlkem", len(k))
		}
	}
}
