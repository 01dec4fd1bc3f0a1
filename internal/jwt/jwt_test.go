package jwt

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func mint(t *testing.T, c Claims) string {
	t.Helper()
	tok, err := Mint(secret, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok := mint(t, Claims{Subject: "acct", Audience: AudienceAPI, Channel: "a/b/c", IssuedAt: now, ExpiresAt: now.Add(MaxTTL)})
	c, err := Verify(secret, tok, now.Add(time.Minute), AudienceAPI, AudienceRelay)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "acct" || c.Channel != "a/b/c" || c.Audience != AudienceAPI || !c.ExpiresAt.Equal(now.Add(MaxTTL)) {
		t.Fatalf("claims = %+v", c)
	}
	if c.Org != "" || c.Group != "" {
		t.Fatalf("a token without org and grp claims read as %+v", c)
	}
}

// TestOrgGroupClaims: the org and grp claims the relay's budgets key on
// survive the round trip.
func TestOrgGroupClaims(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok := mint(t, Claims{Subject: "acct", Audience: AudienceAPI, Org: "acme", Group: "g1", IssuedAt: now, ExpiresAt: now.Add(MaxTTL)})
	c, err := Verify(secret, tok, now, AudienceAPI)
	if err != nil {
		t.Fatal(err)
	}
	if c.Org != "acme" || c.Group != "g1" {
		t.Fatalf("claims = %+v", c)
	}
}

func TestMintRefuses(t *testing.T) {
	now := time.Now()
	for name, c := range map[string]Claims{
		"too long": {Subject: "a", Audience: AudienceAPI, IssuedAt: now, ExpiresAt: now.Add(MaxTTL + time.Second)},
		"zero ttl": {Subject: "a", Audience: AudienceAPI, IssuedAt: now, ExpiresAt: now},
		"no sub":   {Audience: AudienceAPI, IssuedAt: now, ExpiresAt: now.Add(time.Minute)},
		"bad aud":  {Subject: "a", Audience: "other", IssuedAt: now, ExpiresAt: now.Add(time.Minute)},
	} {
		if _, err := Mint(secret, c); err == nil {
			t.Errorf("%s: minted", name)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good := mint(t, Claims{Subject: "acct", Audience: AudienceRelay, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	hs512 := b64([]byte(`{"alg":"HS512","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]
	tampered := parts[0] + "." + b64([]byte(`{"iss":"skytale-api","sub":"root","aud":["skytale-api"],"exp":1900000000}`)) + "." + parts[2]
	cases := map[string]struct {
		tok  string
		now  time.Time
		auds []string
		key  []byte
	}{
		"alg none":     {none, now, []string{AudienceRelay}, secret},
		"alg hs512":    {hs512, now, []string{AudienceRelay}, secret},
		"tampered":     {tampered, now, []string{AudienceRelay, AudienceAPI}, secret},
		"wrong key":    {good, now, []string{AudienceRelay}, []byte("another secret of enough length!")},
		"expired":      {good, now.Add(2 * time.Minute), []string{AudienceRelay}, secret},
		"wrong aud":    {good, now, []string{AudienceAPI}, secret},
		"garbage":      {"not.a.token", now, []string{AudienceRelay}, secret},
		"empty":        {"", now, []string{AudienceRelay}, secret},
		"no exp":       {signRaw(t, `{"iss":"skytale-api","sub":"a","aud":"skytale-api","iat":1800000000}`), now, []string{AudienceAPI}, secret},
		"wrong issuer": {signRaw(t, `{"iss":"evil","sub":"a","aud":"skytale-api","exp":1900000000}`), now, []string{AudienceAPI}, secret},
	}
	for name, c := range cases {
		_, err := Verify(c.key, c.tok, c.now, c.auds...)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		if err != nil && c.tok != "" && strings.Contains(err.Error(), c.tok) {
			t.Errorf("%s: error echoes the token", name)
		}
	}
}

// signRaw signs an arbitrary claims JSON with HS256 under secret.
func signRaw(t *testing.T, claims string) string {
	t.Helper()
	return hs256(secret, claims)
}

// TestVerifyLifetime: exp − iat may be at most 300 s, iat is required, and
// an iat in the future (beyond the clock skew allowance) is refused, so no
// token lives longer than MaxTTL whatever its claims say.
func TestVerifyLifetime(t *testing.T) {
	const iat = 1_800_000_000
	now := time.Unix(iat+10, 0)
	claims := func(extra string) string {
		return signRaw(t, `{"iss":"skytale-api","sub":"a","aud":"skytale-api"`+extra+`}`)
	}
	for name, c := range map[string]struct {
		tok    string
		ok     bool
		reason string
	}{
		"300 s":             {claims(`,"iat":1800000000,"exp":1800000300`), true, ""},
		"301 s":             {claims(`,"iat":1800000000,"exp":1800000301`), false, "lifetime"},
		"ten years":         {claims(`,"iat":1800000000,"exp":2115360000`), false, "lifetime"},
		"no iat":            {claims(`,"exp":1800000100`), false, "issue time"},
		"null iat":          {claims(`,"iat":null,"exp":1800000100`), false, "issue time"},
		"iat in the future": {claims(`,"iat":1900000000,"exp":1900000300`), false, "not valid yet"},
		"iat within skew":   {claims(`,"iat":1800000030,"exp":1800000330`), true, ""},
		"iat after exp":     {claims(`,"iat":1800000200,"exp":1800000100`), false, ""},
	} {
		_, err := Verify(secret, c.tok, now, AudienceAPI)
		if c.ok != (err == nil) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.reason)) {
			t.Errorf("%s: err = %v, want ErrInvalid mentioning %q", name, err, c.reason)
		}
	}
}
