package relay

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"

	"github.com/skytale-oss/skytale/internal/httpx"
)

// frame is a client-to-relay WebSocket frame. The byte slices alias the
// buffer the frame was decoded from and are valid until it is reused.
type frame struct {
	Type    []byte
	Token   []byte
	Channel []byte
	Payload []byte
	// ID is a publish's optional idempotency key (MaxPublishID bytes at
	// most): a retry with the same ID is stored once (see dedup.go).
	ID []byte
	// Batch is an auth frame's request for coalesced pushes: the one key
	// whose value is a JSON boolean.
	Batch bool
}

var errBadFrame = errors.New("relay: frame is not a JSON object with string fields")

// frameJSON is the shape of a client frame for encoding/json.
type frameJSON struct {
	Type    *string `json:"type"`
	Token   *string `json:"token"`
	Channel *string `json:"channel"`
	Payload *string `json:"payload"`
	ID      *string `json:"id"`
	Batch   *bool   `json:"batch"`
}

// decodeFrame decodes a client frame. The common shape, a flat object of
// ASCII strings without escapes (batch a bare true or false) and with only
// the known keys, each at most once, is decoded in place without allocating; anything else goes through
// encoding/json and httpx.CheckKeys, so both paths accept exactly what
// encoding/json accepts for this struct, except that no object may repeat
// a key and a key must spell its field exactly ("TYPE" is not "type"):
// two readers of one frame must never disagree on what it says.
func decodeFrame(b []byte) (f frame, err error) {
	if decodeFlatTo(&f, b) {
		return f, nil
	}
	var v frameJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return frame{}, errBadFrame
	}
	if err := httpx.CheckKeys(b, &v); err != nil {
		return frame{}, errBadFrame
	}
	f = frame{}
	for _, p := range []struct {
		dst **string
		out *[]byte
	}{{&v.Type, &f.Type}, {&v.Token, &f.Token}, {&v.Channel, &f.Channel}, {&v.Payload, &f.Payload}, {&v.ID, &f.ID}} {
		if *p.dst != nil {
			*p.out = []byte(**p.dst)
		}
	}
	f.Batch = v.Batch != nil && *v.Batch
	return f, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// flatScanner reads the flat JSON objects decodeFlat and payloadStart
// accept: string values without escapes or non-ASCII bytes, and booleans.
type flatScanner struct {
	b []byte
	i int
}

func (s *flatScanner) skip() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// at reports whether the next byte is c, and steps over it if so.
func (s *flatScanner) at(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string and returns its bytes (never nil). A string with an
// escape, a control byte or a non-ASCII byte before its closing quote
// fails with s.i at that byte; one without a closing quote fails with s.i
// at the end.
func (s *flatScanner) str() ([]byte, bool) {
	if !s.at('"') {
		return nil, false
	}
	start := s.i
	if end := plainEnd(s.b, start); end >= 0 {
		s.i = end + 1
		return s.b[start:end], true
	}
	// The string fails, or starts fewer than 8 bytes before the end of
	// s.b: find where, over the words without a byte sought and then a
	// byte at a time.
	for len(s.b)-s.i >= 8 && special(binary.LittleEndian.Uint64(s.b[s.i:])) == 0 {
		s.i += 8
	}
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		if c == '"' {
			s.i++
			return s.b[start : s.i-1], true
		}
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return nil, false
		}
	}
	return nil, false
}

// Word-at-a-time tests on 8 bytes of a string read as a little-endian
// uint64, so that its lowest byte comes first in the buffer. A test sets
// the high bit of each byte it flags. Its subtractions borrow out of a
// byte only at a byte sought or above one, so the flags below the first
// byte sought are all clear and that byte's own flag is set: a word
// whose flags are all clear holds none of the bytes sought, and the
// lowest flag of any other word marks the first of them. Flags above it
// may be wrong.
const (
	ones  = 0x0101010101010101 // 0x01 in every byte
	highs = 0x8080808080808080 // the high bit of every byte
)

// unplain flags in w the bytes a plain string may not hold: a control
// byte (below 0x20), a backslash and a non-ASCII byte (0x80 and up). Its
// high bits are not masked: callers OR words together first.
//
// w itself flags every non-ASCII byte. Below the first byte sought every
// byte is ASCII and no borrow comes in, so there an ASCII byte below 0x20
// is the only one for which the byte minus 0x20 wraps into the high half,
// and a backslash the only one whose xor with 0x5c is zero, so that minus
// one wraps.
func unplain(w uint64) uint64 {
	return w | (w - 0x20*ones) | ((w ^ 0x5c*ones) - ones)
}

// special flags in w the bytes that end or spoil a plain string: those
// unplain flags, and the quote (whose xor with 0x22 is zero).
func special(w uint64) uint64 {
	return (unplain(w) | ((w ^ 0x22*ones) - ones)) & highs
}

// plainEnd returns the index of the quote that ends a plain string
// starting at b[i]: a string of ASCII bytes from 0x20 up other than a
// backslash. It returns -1 for any other string, and for one that starts
// fewer than 8 bytes before the end of b.
//
// Short strings (keys, types, channel names) end within their first
// word. Longer ones, payloads above all, are searched for their quote
// with bytes.IndexByte, and the bytes before it checked 32 at a time.
func plainEnd(b []byte, i int) int {
	if len(b)-i < 8 {
		return -1
	}
	if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
		if j := i + bits.TrailingZeros64(m)/8; b[j] == '"' {
			return j
		}
		return -1
	}
	i += 8
	n := bytes.IndexByte(b[i:], '"')
	if n < 0 || !plain(b[i:i+n]) {
		return -1
	}
	return i + n
}

// plain reports whether every byte of p is ASCII from 0x20 up and not a
// backslash. It does not look for quotes.
func plain(p []byte) bool {
	var acc uint64
	for len(p) >= 32 {
		acc |= unplain(binary.LittleEndian.Uint64(p)) | unplain(binary.LittleEndian.Uint64(p[8:])) |
			unplain(binary.LittleEndian.Uint64(p[16:])) | unplain(binary.LittleEndian.Uint64(p[24:]))
		p = p[32:]
	}
	for len(p) >= 8 {
		acc |= unplain(binary.LittleEndian.Uint64(p))
		p = p[8:]
	}
	for _, c := range p {
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return acc&highs == 0
}

// boolean reads true or false.
func (s *flatScanner) boolean() (v, ok bool) {
	switch {
	case hasLit(s.b[s.i:], "true"):
		s.i += 4
		return true, true
	case hasLit(s.b[s.i:], "false"):
		s.i += 5
		return false, true
	}
	return false, false
}

// The keys of a frame's fields, one bit each.
const (
	keyType uint8 = 1 << iota
	keyToken
	keyChannel
	keyPayload
	keyBatch
	keyID
)

// key reads a key and its colon and returns the key's bit. It fails on
// any key but the six of a frame, spelled exactly and without escapes.
func (s *flatScanner) key() (uint8, bool) {
	s.skip()
	var bit uint8
	switch {
	case s.atQuoted(`"type"`):
		bit = keyType
	case s.atQuoted(`"channel"`):
		bit = keyChannel
	case s.atQuoted(`"payload"`):
		bit = keyPayload
	case s.atQuoted(`"token"`):
		bit = keyToken
	case s.atQuoted(`"batch"`):
		bit = keyBatch
	case s.atQuoted(`"id"`):
		bit = keyID
	default:
		return 0, false
	}
	s.skip()
	if !s.at(':') {
		return 0, false
	}
	s.skip()
	return bit, true
}

// atQuoted reports whether the next bytes are the quoted key q, and steps
// over them if so. Inlined with a constant q, it is a few word compares.
func (s *flatScanner) atQuoted(q string) bool {
	if len(s.b)-s.i >= len(q) && string(s.b[s.i:s.i+len(q)]) == q {
		s.i += len(q)
		return true
	}
	return false
}

// decodeFlat is the allocation-free fast path of decodeFrame. It reports
// false for anything it does not fully understand, and for a repeated key
// (which the slow path then refuses).
func decodeFlat(b []byte) (frame, bool) {
	var f frame
	ok := decodeFlatTo(&f, b)
	return f, ok
}

// decodeFlatTo is decodeFlat into *f, which it may leave half filled in
// when it reports false. decodeFrame decodes into its own result: copying
// a frame from one result to the next took a third of the time of a short
// frame's decoding.
func decodeFlatTo(f *frame, b []byte) bool {
	var seen uint8 // one bit per known key
	s := flatScanner{b: b}
	s.skip()
	if !s.at('{') {
		return false
	}
	s.skip()
	if !s.at('}') {
		for {
			bit, ok := s.key()
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			if bit == keyBatch {
				if f.Batch, ok = s.boolean(); !ok {
					return false
				}
			} else {
				val, ok := s.str()
				if !ok {
					return false
				}
				switch bit {
				case keyType:
					f.Type = val
				case keyToken:
					f.Token = val
				case keyChannel:
					f.Channel = val
				case keyPayload:
					f.Payload = val
				case keyID:
					f.ID = val
				}
			}
			s.skip()
			if s.at(',') {
				continue
			}
			if s.at('}') {
				break
			}
			return false
		}
	}
	s.skip()
	return s.i == len(b)
}

// peekHandshake reports whether b, the first bytes of a frame too large
// to read whole at once, is a flat JSON object whose "payload" string
// starts with the base64 of an MLS handshake message (classify): only
// such a frame may be read past readLimit. It decodes a few KiB of the
// payload; the whole payload is classified again once read.
func peekHandshake(b []byte) bool {
	i, ok := payloadStart(b)
	if !ok {
		return false
	}
	rest := b[i:]
	if bytes.IndexByte(rest, '"') >= 0 {
		return false // the payload ends early: the frame is large for another reason
	}
	rest = rest[:min(len(rest), 16<<10)&^3]
	head := make([]byte, base64.StdEncoding.DecodedLen(len(rest)))
	n, err := base64.StdEncoding.Strict().Decode(head, rest)
	if err != nil {
		return false
	}
	return classify(head[:n]).entryType != EntryApp
}

// payloadStart scans the start of a flat frame object (decodeFlat's
// shape) up to its "payload" key and returns the index where the
// payload's string begins, after its opening quote.
func payloadStart(b []byte) (int, bool) {
	s := flatScanner{b: b}
	s.skip()
	if !s.at('{') {
		return 0, false
	}
	for {
		bit, ok := s.key()
		if !ok {
			return 0, false
		}
		switch bit {
		case keyPayload:
			if !s.at('"') {
				return 0, false
			}
			return s.i, true
		case keyBatch:
			if _, ok := s.boolean(); !ok {
				return 0, false
			}
		default:
			if _, ok := s.str(); !ok {
				return 0, false
			}
		}
		s.skip()
		if !s.at(',') {
			return 0, false
		}
	}
}

// hasLit reports whether b starts with the literal lit and no letter or
// digit follows it (so "truex" is not true).
func hasLit(b []byte, lit string) bool {
	if len(b) < len(lit) || string(b[:len(lit)]) != lit {
		return false
	}
	if len(b) == len(lit) {
		return true
	}
	c := b[len(lit)]
	return isSpace(c) || c == ',' || c == '}'
}

// Relay-to-client frames. Push frames are built once per message and shared
// by every subscriber; replies are small and built per connection.

func okFrame(message string) []byte {
	b := append([]byte(`{"type":"ok","message":`), strconv.Quote(message)...)
	return append(b, '}')
}

// channelErrorFrame is an error frame about one channel, which it names
// in a channel field (for a client with many subscriptions on one socket).
func channelErrorFrame(code, channel, message string) []byte {
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Channel string `json:"channel"`
		Message string `json:"message"`
	}{"error", code, channel, message})
	return b
}
