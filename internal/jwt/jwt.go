// Package jwt mints and verifies the short-lived HS256 tokens the directory
// issues and both planes accept.
//
// The contract is narrow on purpose: HS256 only (every other algorithm,
// "none" included, is refused), the issuer is always [Issuer], the audience
// must be one the verifier names, and both the issue time (iat) and the
// expiry (exp) are required, with exp at most [MaxTTL] after iat. The
// directory always sets iat, so a token without one was not minted by it.
// An iat more than [MaxClockSkew] in the verifier's future is refused too:
// otherwise a far-future iat would stretch a token's life past MaxTTL.
package jwt

import (
	"errors"
	"fmt"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"
)

const (
	// Issuer is the only issuer the planes accept.
	Issuer = "skytale-api"
	// AudienceAPI is the default audience of minted tokens.
	AudienceAPI = "skytale-api"
	// AudienceRelay is the other audience the relay accepts.
	AudienceRelay = "skytale-relay"
	// MaxTTL is the longest lifetime a token may have: exp − iat.
	MaxTTL = 300 * time.Second
	// MaxClockSkew is how far in the future of the verifier's clock a
	// token's iat may be (the minting host's clock may run ahead).
	MaxClockSkew = 30 * time.Second
)

// ErrInvalid is wrapped by every verification failure. Its text never
// contains the token.
var ErrInvalid = errors.New("jwt: invalid token")

// Claims is what a token says.
type Claims struct {
	Subject  string // the account UUID
	Audience string
	Channel  string // the "chan" claim: set for channel-scoped tokens
	// Org (the "org" claim) is the account's org, and Group (the "grp"
	// claim) the opaque id of its signup group: the accounts the
	// directory made from one IPv4 /24 or IPv6 /64, which share one
	// storage budget on the relay. Either may be empty (tokens minted
	// before the claims, accounts the operator made).
	Org   string
	Group string
	// Device (the "dev" claim) is the linked device whose API key minted
	// the token, empty for the account's own keys. A revoked device's
	// tokens are refused by both planes while the account's stand.
	Device    string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

type wireClaims struct {
	Channel string `json:"chan,omitempty"`
	Org     string `json:"org,omitempty"`
	Group   string `json:"grp,omitempty"`
	Device  string `json:"dev,omitempty"`
	gojwt.RegisteredClaims
}

// Mint signs c with HS256. The lifetime must be positive and at most MaxTTL.
func Mint(secret []byte, c Claims) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("jwt: empty secret")
	}
	if c.Subject == "" {
		return "", errors.New("jwt: empty subject")
	}
	if c.Audience != AudienceAPI && c.Audience != AudienceRelay {
		return "", fmt.Errorf("jwt: unknown audience %q", c.Audience)
	}
	ttl := c.ExpiresAt.Sub(c.IssuedAt)
	if ttl <= 0 || ttl > MaxTTL {
		return "", fmt.Errorf("jwt: lifetime %v outside (0, %v]", ttl, MaxTTL)
	}
	wc := wireClaims{
		Channel: c.Channel,
		Org:     c.Org,
		Group:   c.Group,
		Device:  c.Device,
		RegisteredClaims: gojwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   c.Subject,
			Audience:  gojwt.ClaimStrings{c.Audience},
			IssuedAt:  gojwt.NewNumericDate(c.IssuedAt),
			ExpiresAt: gojwt.NewNumericDate(c.ExpiresAt),
		},
	}
	return gojwt.NewWithClaims(gojwt.SigningMethodHS256, wc).SignedString(secret)
}

// Verify checks token against secret at time now and returns its claims.
// The audience must be one of audiences.
func Verify(secret []byte, token string, now time.Time, audiences ...string) (Claims, error) {
	if len(secret) == 0 {
		return Claims{}, fmt.Errorf("%w: no secret configured", ErrInvalid)
	}
	var wc wireClaims
	p := gojwt.NewParser(
		gojwt.WithValidMethods([]string{gojwt.SigningMethodHS256.Alg()}),
		gojwt.WithIssuer(Issuer),
		gojwt.WithExpirationRequired(),
		gojwt.WithTimeFunc(func() time.Time { return now }),
		gojwt.WithStrictDecoding(),
	)
	_, err := p.ParseWithClaims(token, &wc, func(*gojwt.Token) (any, error) { return secret, nil })
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalid, reason(err))
	}
	if wc.Subject == "" {
		return Claims{}, fmt.Errorf("%w: missing subject", ErrInvalid)
	}
	if wc.IssuedAt == nil {
		return Claims{}, fmt.Errorf("%w: missing issue time", ErrInvalid)
	}
	if wc.ExpiresAt.Sub(wc.IssuedAt.Time) > MaxTTL {
		return Claims{}, fmt.Errorf("%w: lifetime longer than 300 seconds", ErrInvalid)
	}
	if wc.IssuedAt.Time.After(now.Add(MaxClockSkew)) {
		return Claims{}, fmt.Errorf("%w: not valid yet", ErrInvalid)
	}
	aud := ""
	for _, a := range wc.Audience {
		for _, want := range audiences {
			if a == want {
				aud = a
			}
		}
	}
	if aud == "" {
		return Claims{}, fmt.Errorf("%w: wrong audience", ErrInvalid)
	}
	return Claims{Subject: wc.Subject, Audience: aud, Channel: wc.Channel, Org: wc.Org, Group: wc.Group, Device: wc.Device, IssuedAt: wc.IssuedAt.Time, ExpiresAt: wc.ExpiresAt.Time}, nil
}

// reason maps a parser error to a short fixed phrase, so nothing from the
// token itself is echoed.
func reason(err error) string {
	switch {
	case errors.Is(err, gojwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, gojwt.ErrTokenRequiredClaimMissing):
		return "missing required claim"
	case errors.Is(err, gojwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, gojwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, gojwt.ErrTokenUnverifiable), errors.Is(err, gojwt.ErrTokenSignatureInvalid):
		return "unacceptable algorithm"
	case errors.Is(err, gojwt.ErrTokenNotValidYet), errors.Is(err, gojwt.ErrTokenUsedBeforeIssued):
		return "not valid yet"
	case errors.Is(err, gojwt.ErrTokenMalformed):
		return "malformed"
	default:
		return "rejected"
	}
}
