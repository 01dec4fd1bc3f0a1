package devcert

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/base58"
)

func keys(t testing.TB) (ed25519.PrivateKey, ed25519.PublicKey, []byte) {
	_, person, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dev, _, _ := ed25519.GenerateKey(rand.Reader)
	hk := make([]byte, 32)
	rand.Read(hk)
	return person, dev, hk
}

func TestCertRoundTripAndTamper(t *testing.T) {
	person, dev, hk := keys(t)
	c, err := Issue(person, dev, hk, 7, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	pub := person.Public().(ed25519.PublicKey)
	got, err := Parse(pub, dev, c.Compact())
	if err != nil || got.Serial != 7 || !got.Issued.Equal(time.Unix(1700000000, 0)) || !bytes.Equal(got.HPKEKey, hk) {
		t.Fatalf("parse: %+v %v", got, err)
	}
	for i := range CompactSize {
		b := c.Compact()
		b[i] ^= 1
		if _, err := Parse(pub, dev, b); err == nil {
			t.Fatalf("a flipped byte %d still verifies", i)
		}
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := Parse(pub, other, c.Compact()); err == nil {
		t.Fatal("the certificate verifies for another device key")
	}
	if _, err := Issue(person, pub, hk, 1, time.Now()); err == nil {
		t.Fatal("the identity key certified itself")
	}
}

func TestIdentitySplit(t *testing.T) {
	person, dev, hk := keys(t)
	c, _ := Issue(person, dev, hk, 1, time.Now())
	id := MemberIdentity("did:key:z6Mkexample", c)
	did, compact, ok := SplitIdentity(id)
	if !ok || did != "did:key:z6Mkexample" || !bytes.Equal(compact, c.Compact()) {
		t.Fatalf("split %q: %v", id, ok)
	}
	if _, _, ok := SplitIdentity(id + "1"); ok {
		t.Fatal("a longer certificate splits")
	}
	if _, _, ok := SplitIdentity("did:key:z6Mkexample#dev:zabc"); ok {
		t.Fatal("an old device identity splits as a linked one")
	}
}

func TestRevocation(t *testing.T) {
	person, dev, _ := keys(t)
	r, err := Revoke(person, dev, time.UnixMilli(1700000000123))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRevocation(r.Bytes())
	if err != nil || !bytes.Equal(got.SigningKey, dev) || got.RevokedAt.UnixMilli() != 1700000000123 {
		t.Fatalf("%+v %v", got, err)
	}
	for i := range RevocationSize {
		b := r.Bytes()
		b[i] ^= 0x80
		if _, err := ParseRevocation(b); err == nil {
			t.Fatalf("a flipped byte %d still verifies", i)
		}
	}
}

func FuzzParse(f *testing.F) {
	person, dev, hk := keys(f)
	c, _ := Issue(person, dev, hk, 3, time.Unix(1700000000, 0))
	pub := person.Public().(ed25519.PublicKey)
	f.Add(c.Compact())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(pub, dev, b)
		if err != nil {
			return
		}
		if !bytes.Equal(got.Compact(), b) {
			t.Fatalf("round trip changed the bytes")
		}
	})
}

func FuzzParseRevocation(f *testing.F) {
	person, dev, _ := keys(f)
	r, _ := Revoke(person, dev, time.Now())
	f.Add(r.Bytes())
	f.Add([]byte("SKR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseRevocation(b)
		if err != nil {
			return
		}
		if !bytes.Equal(got.Bytes(), b) {
			t.Fatalf("round trip changed the bytes")
		}
	})
}

func FuzzSplitIdentity(f *testing.F) {
	person, dev, hk := keys(f)
	c, _ := Issue(person, dev, hk, 3, time.Unix(1700000000, 0))
	f.Add(MemberIdentity("did:key:z6Mkx", c))
	f.Add("did:key:z6Mkx#dvc:z")
	f.Fuzz(func(t *testing.T, s string) {
		did, compact, ok := SplitIdentity(s)
		if ok && did+IdentityMark+base58.Encode(compact) != s {
			t.Fatalf("split of %q does not join back", s)
		}
	})
}
