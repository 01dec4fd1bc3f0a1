package relay

import (
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// refuseUnauthenticated closes a connection whose first frame is not an
// auth frame.
func (c *conn) refuseUnauthenticated() {
	c.closeWith(websocket.StatusPolicyViolation, "authentication required",
		backend.ErrorFrame("auth_required", "the first frame must be an auth frame"), true)
}

func (c *conn) authenticate(token string, batch bool, pathChannel string) bool {
	s := c.srv
	claims, err := jwt.Verify(s.cfg.JWTSecret, token, s.cfg.Now(), jwt.AudienceAPI, jwt.AudienceRelay)
	if err != nil {
		s.log.Info("relay: authentication failed", "remote", c.remote)
		c.closeWith(websocket.StatusPolicyViolation, "authentication failed",
			backend.ErrorFrame("unauthorized", "invalid or expired token"), true)
		return false
	}
	if pathChannel != "" && claims.Channel != "" && claims.Channel != pathChannel {
		s.log.Info("relay: token scoped to another channel", "remote", c.remote, "sub", claims.Subject)
		c.closeWith(websocket.StatusPolicyViolation, "forbidden",
			backend.ErrorFrame("forbidden", "token is scoped to another channel"), true)
		return false
	}
	c.sub = claims.Subject
	c.payer = payerOf(claims)
	c.scope = claims.Channel
	c.dev = claims.Device
	// Register for revocation before checking it, so a concurrent
	// revocation either sees this conn or is seen here.
	if !s.hub.authenticated(c, s.cfg.MaxConnsPerAccount) {
		s.counters.refused.Add(1)
		s.log.Info("relay: too many connections for one account", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusTryAgainLater, "too many connections",
			backend.ErrorFrame("too_many_connections", "this account has too many open connections; close one and retry"), true)
		return false
	}
	victim, ok := s.adm.loggedIn(c)
	if !ok {
		return false // its login seat went to a newer socket
	}
	if victim != nil {
		victim.evictIdle()
	}
	c.authed.Store(true)
	c.startPings()
	// readLoop holds frames to readLimit itself, and reads a handshake
	// past it within the large-frame budget, up to the archive's cap; the
	// library's limit is that of the largest handshake.
	c.ws.SetReadLimit(MaxFrame)
	if s.isRevokedClaims(c.sub, c.dev) {
		s.log.Info("relay: revoked subject refused", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusPolicyViolation, "forbidden",
			backend.ErrorFrame("forbidden", "subject is revoked"), true)
		return false
	}
	c.memGen = s.memGen.Load()
	c.batch.Store(batch)
	c.setExpiry(claims.ExpiresAt)
	joined := pathChannel == "" || c.join(pathChannel)
	s.log.Info("relay: authenticated", "remote", c.remote, "sub", c.sub)
	c.push(okFrame("authenticated"))
	if !joined {
		c.push(notMemberFrame(pathChannel))
	}
	return true
}

// reauthenticate handles an auth frame on an authenticated socket: a fresh
// token for the same subject and scope moves the socket's expiry. A token
// that does not verify is refused and the one in force stays; a token for
// another subject or scope closes the socket.
func (c *conn) reauthenticate(token string) bool {
	s := c.srv
	claims, err := jwt.Verify(s.cfg.JWTSecret, token, s.cfg.Now(), jwt.AudienceAPI, jwt.AudienceRelay)
	if err != nil {
		c.fail("unauthorized", "invalid or expired token; the current one stays in force until it expires")
		return true
	}
	if claims.Subject != c.sub || claims.Channel != c.scope || claims.Device != c.dev {
		s.log.Info("relay: reauthentication as another subject or scope", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusPolicyViolation, "reauthentication changed the subject or scope",
			backend.ErrorFrame("forbidden", "a fresh token must have the same subject and channel scope as the first"), false)
		return false
	}
	if s.isRevokedClaims(c.sub, c.dev) {
		c.closeWith(websocket.StatusPolicyViolation, "forbidden", backend.ErrorFrame("forbidden", "subject is revoked"), true)
		return false
	}
	c.setExpiry(claims.ExpiresAt)
	c.reply(okFrame("reauthenticated"))
	return true
}

// setExpiry makes exp the moment the socket closes unless reauthenticated.
func (c *conn) setExpiry(exp time.Time) {
	c.exp.Store(exp.UnixNano())
	d := exp.Sub(c.srv.cfg.Now())
	c.expMu.Lock()
	defer c.expMu.Unlock()
	if c.expTimer == nil {
		c.expTimer = time.AfterFunc(d, c.checkExpiry)
	} else {
		c.expTimer.Reset(d)
	}
}

// checkExpiry runs on the expiry timer; a token renewed meanwhile moves
// the timer instead.
func (c *conn) checkExpiry() {
	left := time.Unix(0, c.exp.Load()).Sub(c.srv.cfg.Now())
	if left > 0 {
		c.expMu.Lock()
		c.expTimer.Reset(left)
		c.expMu.Unlock()
		return
	}
	c.expire()
}

func (c *conn) stopExpiry() {
	c.expMu.Lock()
	defer c.expMu.Unlock()
	if c.expTimer != nil {
		c.expTimer.Stop()
	}
}

// expire closes a socket whose token has expired, after the frames
// already queued for it.
func (c *conn) expire() {
	if c.isClosing() {
		return
	}
	c.srv.log.Info("relay: token expired, closing", "remote", c.remote, "sub", c.sub)
	c.closeWith(websocket.StatusPolicyViolation, "token expired",
		backend.ErrorFrame("token_expired", "the token expired; send a fresh auth frame before exp to stay connected"), false)
}
