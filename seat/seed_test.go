package seat

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const testPhrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon " +
	"abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon art"

// Computed independently (Python hashlib/hmac and pyca/cryptography) from
// BIP-39, RFC 5869 and RFC 8032 for testPhrase.
const (
	testSeedHex    = "408b285c123836004f4b8842c89324c1f01382450c0d439af345ba7fc49acf705489c6fc77dbd4e3dc1dd8cc6bc9f043db8ada1e243c4a0eafb290d399480840"
	testSyncKeyHex = "9f713725efdfbbc6044416c53435c1e363213c6abc827095e33dba7fbf24df56"
	testPubHex     = "4509794979d5743d93bea08e87e41561981c9350cd83387175875a390bd92f66"
	testDID        = "did:key:z6Mkj6kZADnzMrGu2hNTz2G8zH1BTvfHiJoUXdcoRB5zsebX"
)

func mustPhrase(t testing.TB, s string) *Phrase {
	t.Helper()
	p, err := ParsePhrase(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDerivationVectors(t *testing.T) {
	seed := mustPhrase(t, testPhrase).Seed()
	if got := hex.EncodeToString(seed.b[:]); got != testSeedHex {
		t.Errorf("seed %s, want %s", got, testSeedHex)
	}
	if got := hex.EncodeToString(seed.derive(labelSyncKey, 32)); got != testSyncKeyHex {
		t.Errorf("sync key %s, want %s", got, testSyncKeyHex)
	}
	id := seed.Identity()
	if got := hex.EncodeToString(id.PublicKey()); got != testPubHex {
		t.Errorf("identity public key %s, want %s", got, testPubHex)
	}
	if got := id.DID(); got != testDID {
		t.Errorf("DID %s, want %s", got, testDID)
	}
}

func TestNewPhrase(t *testing.T) {
	p, err := NewPhrase(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Words()) != PhraseWords {
		t.Fatalf("%d words", len(p.Words()))
	}
	q := mustPhrase(t, strings.Join(p.Words(), " "))
	if q.words != p.words {
		t.Error("a new phrase does not parse back to itself")
	}
	if r, _ := NewPhrase(nil); r.words == p.words {
		t.Error("two new phrases are equal")
	}
	// Deterministic from the entropy source: all-zero entropy is testPhrase.
	z, err := NewPhrase(bytes.NewReader(make([]byte, 32)))
	if err != nil || z.words != testPhrase {
		t.Errorf("zero entropy gave %v, %v", z.Words(), err)
	}
	if _, err := NewPhrase(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Error("short entropy accepted")
	}
}

func TestParsePhrase(t *testing.T) {
	messy := "  " + strings.ToUpper(strings.ReplaceAll(testPhrase, " ", " \t\n ")) + "\n"
	if p := mustPhrase(t, messy); p.words != testPhrase {
		t.Errorf("normalized to %q", p.words)
	}
	w := strings.Fields(testPhrase)
	bad := map[string]string{
		"23 words":     strings.Join(w[:23], " "),
		"25 words":     testPhrase + " abandon",
		"12 words":     "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
		"unknown word": strings.Replace(testPhrase, "art", "zzzsecret", 1),
		"checksum":     strings.Replace(testPhrase, "art", "zoo", 1),
		"empty":        "",
		"huge":         testPhrase + strings.Repeat(" ", 5000),
	}
	for name, s := range bad {
		_, err := ParsePhrase(s)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "zzzsecret") || strings.Contains(err.Error(), "abandon") {
			t.Errorf("%s: error reveals words: %v", name, err)
		}
		if !strings.HasPrefix(err.Error(), "seat: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
}

func TestLabelsSeparateKeys(t *testing.T) {
	seed := mustPhrase(t, testPhrase).Seed()
	a, b := seed.derive(labelSyncKey, 32), seed.derive(labelIdentity, 32)
	if bytes.Equal(a, b) {
		t.Fatal("sync and identity keys coincide")
	}
	other, _ := NewPhrase(nil)
	if bytes.Equal(a, other.Seed().derive(labelSyncKey, 32)) {
		t.Fatal("two phrases give the same sync key")
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	p := mustPhrase(t, testPhrase)
	seed := p.Seed()
	id := seed.Identity()
	sk := seed.SyncKey()
	secrets := []string{"abandon", testSeedHex[:16], testSyncKeyHex[:16], hex.EncodeToString(id.priv[:8])}
	values := []any{p, *p, seed, *seed, sk, *sk, id, *id, []any{p, seed}, struct{ P *Phrase }{p}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		for _, v := range values {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets {
				if strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
					t.Errorf("Sprintf(%q, %T) = %q reveals a secret", verb, v, out)
				}
			}
		}
	}
	for _, v := range values {
		j, err := json.Marshal(v)
		if err != nil {
			continue
		}
		for _, sec := range secrets {
			if strings.Contains(strings.ToLower(string(j)), strings.ToLower(sec)) {
				t.Errorf("json.Marshal(%T) = %s reveals a secret", v, j)
			}
		}
	}
	if got := fmt.Sprint(p); got != "seat.Phrase(REDACTED)" {
		t.Errorf("Phrase prints as %q", got)
	}
	if got := fmt.Sprint(id); got != "seat.Identity("+testDID+")" {
		t.Errorf("Identity prints as %q", got)
	}
}

func TestIdentitySigns(t *testing.T) {
	id := mustPhrase(t, testPhrase).Seed().Identity()
	var _ crypto.Signer = id
	sig, err := id.Sign(nil, []byte("hello"), crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(id.PublicKey(), []byte("hello"), sig) {
		t.Fatal("signature does not verify")
	}
	priv := id.PrivateKey()
	priv[0] ^= 1
	if id.priv[0] == priv[0] {
		t.Fatal("PrivateKey returned the internal slice")
	}
}

func TestDIDKey(t *testing.T) {
	// From the did:key method's examples.
	pub, _ := hex.DecodeString("94966b7c08e405775f8de6cc1c4508f6eb227403e1025b2c8ad2d7477398c5b2")
	const did = "did:key:z6MkpTHR8VNsBxYAAWHut2Geadd9jSwuBV8xRoAnwWsdvktH"
	if got := DIDKey(pub); got != did {
		t.Errorf("DIDKey = %s, want %s", got, did)
	}
	got, err := ParseDIDKey(did)
	if err != nil || !bytes.Equal(got, pub) {
		t.Errorf("ParseDIDKey = %x, %v", got, err)
	}
	for _, bad := range []string{
		"", "did:key:", "did:key:z", did[:len(did)-1], did + "1",
		strings.Replace(did, "did:key:z", "did:key:m", 1),
		"did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc", // X25519, not Ed25519
		"did:key:z0", "did:web:example.com",
	} {
		if _, err := ParseDIDKey(bad); err == nil {
			t.Errorf("ParseDIDKey(%q) accepted", bad)
		}
	}
}

func FuzzParseDIDKey(f *testing.F) {
	f.Add("did:key:z6MkpTHR8VNsBxYAAWHut2Geadd9jSwuBV8xRoAnwWsdvktH")
	f.Add(testDID)
	f.Add("did:key:z")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := ParseDIDKey(s)
		if err != nil {
			return
		}
		if DIDKey(pub) != s {
			t.Fatalf("ParseDIDKey accepted non-canonical %q", s)
		}
	})
}

func FuzzParsePhrase(f *testing.F) {
	f.Add(testPhrase)
	f.Add(strings.ToUpper(testPhrase))
	f.Add("abandon")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePhrase(s)
		if err != nil {
			return
		}
		q, err := ParsePhrase(strings.Join(p.Words(), " "))
		if err != nil || q.words != p.words || len(p.Words()) != PhraseWords {
			t.Fatalf("accepted phrase does not parse back: %v", err)
		}
	})
}
