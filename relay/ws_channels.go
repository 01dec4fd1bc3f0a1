package relay

import (
	"context"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

func notMemberFrame(ch string) []byte {
	return channelErrorFrame("not_a_member", ch, "this account is not a member of "+ch)
}

// join subscribes c to ch if its account may read ch, and reports whether
// it did.
func (c *conn) join(ch string) bool {
	s := c.srv
	if s.readsGated() && !s.checkMember(context.Background(), ch, c.sub) {
		return false
	}
	if !s.hub.subscribeIf(ch, c, func() bool { return !s.readsGated() || s.isMember(ch, c.sub) }) {
		return false
	}
	c.subs[ch] = !s.gated() || s.isMember(ch, c.sub)
	return true
}

// checkChannel validates a channel name against the name rules and the
// token's scope, replying with an error frame when it fails.
func (c *conn) checkChannel(name string) bool {
	if err := channel.Valid(name); err != nil {
		c.fail("invalid_channel", "channel must be org/namespace/service: "+err.Error())
		return false
	}
	if c.scope != "" && c.scope != name {
		c.fail("forbidden", "token is scoped to another channel")
		return false
	}
	return true
}

func (c *conn) subscribe(name string) {
	if !c.checkChannel(name) {
		return
	}
	if _, ok := c.subs[name]; !ok {
		if len(c.subs) >= MaxSubscriptions {
			c.fail("too_many_subscriptions", "at most 50 channels per connection")
			return
		}
		if !c.join(name) {
			c.reply(notMemberFrame(name))
			return
		}
	}
	c.reply(okFrame("subscribed to " + name))
}

func (c *conn) unsubscribe(name string) {
	if !c.checkChannel(name) {
		return
	}
	if _, ok := c.subs[name]; !ok {
		c.fail("not_subscribed", "not subscribed to "+name)
		return
	}
	delete(c.subs, name)
	c.srv.hub.unsubscribe(name, c)
	c.reply(okFrame("unsubscribed from " + name))
}

func (c *conn) publish(name, b64, id []byte) {
	member, ok := c.subs[string(name)]
	if !ok {
		if c.checkChannel(string(name)) {
			if !c.srv.checkMember(context.Background(), string(name), c.sub) {
				c.reply(notMemberFrame(string(name)))
			} else {
				c.fail("not_subscribed", "subscribe to the channel before publishing to it")
			}
		}
		return
	}
	if !member {
		// Subscribed with open reads, or before a removal elsewhere
		// made the reader recheck: publishing needs membership.
		if !c.srv.checkMember(context.Background(), string(name), c.sub) {
			c.reply(notMemberFrame(string(name)))
			return
		}
		c.subs[string(name)] = true
	}
	if len(b64) == 0 {
		c.fail("bad_payload", "payload is empty")
		return
	}
	if len(id) > MaxPublishID {
		c.fail("bad_id", "id is over 64 bytes")
		return
	}
	s := c.srv
	if len(b64) > base64.StdEncoding.EncodedLen(s.maxHandshake) {
		c.fail("payload_too_large", handshakeTooLarge(s.maxHandshake))
		return
	}
	// The payload's size is bounded by the frame: a frame over readLimit
	// holds the large-frame budget, which counts this buffer.
	payload := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Strict().Decode(payload, b64)
	// Rejecting anything but canonical base64 (no line breaks) lets the
	// push frame carry the client's encoding unchanged.
	if err != nil || base64.StdEncoding.EncodedLen(n) != len(b64) {
		c.fail("bad_payload", "payload is not standard padded base64")
		return
	}
	payload = payload[:n]
	hdr := classify(payload)
	if hdr.entryType == EntryApp && n > MaxPayload {
		c.fail("payload_too_large", "payload is over 1 MiB decoded")
		return
	}
	if n > s.maxHandshake {
		c.fail("payload_too_large", handshakeTooLarge(s.maxHandshake))
		return
	}
	ch := c.lastPub
	if string(name) != ch {
		ch = string(name)
		c.lastPub = ch
	}
	c.touch(time.Now().UnixNano())
	f, pb := c.pushFrame(ch, b64, s.lendFrames)
	c.slots <- struct{}{}
	c.pending.Add(1)
	s.counters.publishedBytes.Add(uint64(n))
	s.arch.Acquire(int64(len(payload)))
	r := backend.Request{Conn: c, Sub: c.payer, Channel: ch, Payload: payload,
		EntryType: hdr.entryType, Commit: hdr.commit, Epoch: hdr.epoch,
		Frame: f, Buf: pb, Weight: int64(len(payload))}
	if len(id) > 0 {
		r.ID = dedupKey(c.sub, ch, string(id))
	}
	s.arch.Submit(r)
}

func handshakeTooLarge(max int) string {
	return "handshake payload is over " + strconv.Itoa(max) + " bytes decoded"
}

// pushFrame starts the push frame of a publish: everything up to and
// including the payload's base64 b64. For a frame over readLimit (c.rbuf),
// whose buffer is not reused, it is built in that buffer over the
// publish frame's own head when that is long enough ({"type":"publish",
// "channel":… before the payload is exactly as long as the push frame's
// head), so a large handshake is held once as base64, not twice.
func (c *conn) pushFrame(ch string, b64 []byte, lend bool) ([]byte, *backend.PushBuf) {
	if b := c.rbuf; b != nil && len(b64) > 0 {
		off := cap(b) - cap(b64)
		head := backend.PushPrefix(ch, 0)
		if off >= len(head) && off+len(b64) <= len(b) && &b[off] == &b64[0] {
			start := off - len(head)
			copy(b[start:off], head)
			return b[start : off+len(b64)], nil
		}
	}
	if lend {
		f, pb := backend.LendPushPrefix(ch, len(b64))
		return append(f, b64...), pb
	}
	return append(backend.PushPrefix(ch, len(b64)), b64...), nil
}
