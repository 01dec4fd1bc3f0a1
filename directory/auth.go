package directory

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/internal/jwt"
)

// Prefixes of the secrets the directory hands out. The random part is 32
// bytes of Config.Rand in unpadded base64url.
const (
	prefixAPIKey    = "sk_live_"
	prefixChanKey   = "sk_chan_"
	prefixInvite    = "skt_inv_"
	prefixFed       = "skt_fed_"
	prefixOrgInvite = "skt_org_"
	prefixPollToken = "skt_poll_"
)

// newSecret returns a fresh secret with the given prefix and its SHA-256
// hash, the only form the store keeps.
func (s *Server) newSecret(prefix string) (raw string, hash []byte, err error) {
	var b [32]byte
	if _, err := io.ReadFull(s.cfg.Rand, b[:]); err != nil {
		return "", nil, fmt.Errorf("directory: read random: %w", err)
	}
	raw = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return raw, hashSecret(raw), nil
}

// hashSecret is the at-rest form of a secret. The secrets are 256-bit
// random strings, so a plain SHA-256 is enough: there is nothing to brute
// force, and lookups by hash stay a single index probe.
func hashSecret(raw string) []byte {
	sum := sha256.Sum256([]byte(raw))
	return sum[:]
}

// newID returns a random (version 4) UUID, RFC 9562 §5.4.
func (s *Server) newID() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(s.cfg.Rand, b[:]); err != nil {
		return "", fmt.Errorf("directory: read random: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// isInternal reports whether the request carries the internal secret.
func (s *Server) isInternal(r *http.Request) bool {
	tok, ok := httpx.Bearer(r)
	return ok && len(s.cfg.InternalSecret) > 0 && hmac.Equal([]byte(tok), s.cfg.InternalSecret)
}

// authenticate resolves the Bearer credential (an API key or a JWT with
// audience skytale-api) to a principal. On failure it writes the answer and
// returns false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (principal, bool) {
	tok, ok := httpx.Bearer(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "unauthorized", "missing bearer credential")
		return principal{}, false
	}
	var (
		p       principal
		revoked bool
		err     error
	)
	if strings.HasPrefix(tok, prefixAPIKey) || strings.HasPrefix(tok, prefixChanKey) {
		p, revoked, err = s.store.lookupKey(r.Context(), hashSecret(tok))
		if errors.Is(err, errNotFound) {
			writeError(w, http.StatusUnauthorized, "unauthorized", "invalid API key")
			return principal{}, false
		}
	} else {
		claims, verr := jwt.Verify(s.cfg.JWTSecret, tok, s.cfg.Now(), jwt.AudienceAPI)
		if verr != nil {
			// Verify's errors are fixed phrases that never quote the token.
			writeError(w, http.StatusUnauthorized, "unauthorized", verr.Error())
			return principal{}, false
		}
		p = principal{account: claims.Subject, channel: claims.Channel, device: claims.Device}
		p.org, revoked, err = s.store.lookupAccount(r.Context(), claims.Subject)
		if errors.Is(err, errNotFound) {
			writeError(w, http.StatusUnauthorized, "unauthorized", "unknown account")
			return principal{}, false
		}
		if err == nil && !revoked && p.device != "" {
			revoked, err = s.store.deviceRevoked(r.Context(), p.account, p.device)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return principal{}, false
	}
	if revoked && p.device != "" {
		writeError(w, http.StatusForbidden, "revoked", "this device has been revoked by its person; its credentials no longer work")
		return principal{}, false
	}
	if revoked {
		writeError(w, http.StatusForbidden, "revoked", "credential has been revoked")
		return principal{}, false
	}
	return p, true
}

func (s *Server) authed(h func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := s.authenticate(w, r); ok {
			h(w, r, p)
		}
	}
}

// allows reports whether p may act on channel: account-wide credentials may,
// channel-scoped ones only on their own channel.
func (p principal) allows(channel string) bool {
	return p.channel == "" || p.channel == channel
}

func forbidScope(w http.ResponseWriter) {
	writeError(w, http.StatusForbidden, "forbidden", "credential is scoped to another channel")
}

func forbidScoped(w http.ResponseWriter) {
	writeError(w, http.StatusForbidden, "forbidden", "a channel-scoped credential cannot do this")
}
