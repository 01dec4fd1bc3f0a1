package backend

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Pages of GET /v1/messages and GET /v1/sync are streamed: rows go to the
// client through one bounded buffer as SQLite yields them, so a read holds
// at most a buffer and one row, whatever the page's size.
const (
	pageBuffer = 64 << 10
	b64Chunk   = 48 << 10 // payload bytes encoded at a time; a multiple of 3
)

var pageBufs = sync.Pool{New: func() any {
	return &pageBuf{w: bufio.NewWriterSize(nil, pageBuffer), b64: make([]byte, 0, base64.StdEncoding.EncodedLen(b64Chunk))}
}}

type pageBuf struct {
	w   *bufio.Writer
	b64 []byte
	num []byte
	raw []byte // payload bytes read from the log, b64Chunk at most
	win []byte // a window of the log, LogWindowSize
}

// LogWindowSize is how much of a log segment a page reads at a time: the
// SQLite archive reads a payload in the log through a window this big.
const LogWindowSize = 64 << 10

// Window is the page's buffer for reading the log through, LogWindowSize
// long; the page keeps it until Release.
func (e *PageEncoder) Window() []byte {
	if e.pb.win == nil {
		e.pb.win = make([]byte, LogWindowSize)
	}
	return e.pb.win
}

// pageTail is the longest end of a page.
const pageTail = len(`],"has_more":false,"truncated":false,"oldest_seq":18446744073709551615}` + "\n")

// PageEncoder writes one page of entries of GET /v1/messages or GET
// /v1/sync as JSON through a pooled buffer, whichever archive yields the
// entries.
type PageEncoder struct {
	pb      *pageBuf
	appOnly bool
	max     int
	size    int
	n       int
	// More is set when a bound cut the page (or by the archive, when
	// entries are left past it).
	More bool

	Truncated bool   // since was older than what the channel holds
	Oldest    uint64 // the oldest seq the log holds, 0 for none
	First     uint64 // the page's first entry, 0 for none
}

// NewPageEncoder starts a page of at most maxBytes written to w: of
// GET /v1/messages (appOnly, a "messages" list) or of GET /v1/sync (an
// "entries" list). Release it when done.
func NewPageEncoder(w io.Writer, maxBytes int, appOnly bool) *PageEncoder {
	key := `{"entries":[`
	if appOnly {
		key = `{"messages":[`
	}
	pb := pageBufs.Get().(*pageBuf)
	pb.w.Reset(w)
	pb.w.WriteString(key)
	return &PageEncoder{pb: pb, appOnly: appOnly, max: maxBytes, size: len(key)}
}

// Add writes one entry, or reports false (and sets More) when it would
// take the page past its byte bound; the first entry always fits.
func (e *PageEncoder) Add(seq uint64, et uint8, ts int64, payload []byte) (bool, error) {
	head, fits := e.begin(seq, et, ts, int64(len(payload)))
	if !fits {
		return false, nil
	}
	pb := e.pb
	for off := 0; off < len(payload); off += b64Chunk {
		pb.b64 = base64.StdEncoding.AppendEncode(pb.b64[:0], payload[off:min(off+b64Chunk, len(payload))])
		pb.w.Write(pb.b64)
	}
	return e.end(head)
}

// AddAt is Add for a payload of n bytes at off in src, read b64Chunk at a
// time.
func (e *PageEncoder) AddAt(seq uint64, et uint8, ts int64, src io.ReaderAt, off, n int64) (bool, error) {
	head, fits := e.begin(seq, et, ts, n)
	if !fits {
		return false, nil
	}
	pb := e.pb
	if pb.raw == nil {
		pb.raw = make([]byte, b64Chunk)
	}
	for o := int64(0); o < n; o += b64Chunk {
		raw := pb.raw[:min(b64Chunk, n-o)]
		if _, err := src.ReadAt(raw, off+o); err != nil {
			return false, fmt.Errorf("relay: archive read: log: %w", err)
		}
		pb.b64 = base64.StdEncoding.AppendEncode(pb.b64[:0], raw)
		pb.w.Write(pb.b64)
	}
	return e.end(head)
}

// begin writes the start of an entry of an n-byte payload, up to the
// payload, and returns where the rest of pb.num begins; false (and more
// set) when the entry would take the page past its byte bound.
func (e *PageEncoder) begin(seq uint64, et uint8, ts int64, n int64) (int, bool) {
	pb := e.pb
	num := pb.num[:0]
	if e.n > 0 {
		num = append(num, ',')
	}
	num = append(num, `{"seq":`...)
	num = strconv.AppendUint(num, seq, 10)
	if !e.appOnly {
		num = append(num, `,"entry_type":`...)
		num = strconv.AppendUint(num, uint64(et), 10)
	}
	num = append(num, `,"payload":"`...)
	head := len(num)
	num = append(num, `","ts":`...)
	num = strconv.AppendInt(num, ts, 10)
	num = append(num, '}')
	pb.num = num
	entry := len(num) + base64.StdEncoding.EncodedLen(int(n))
	if e.n > 0 && e.size+entry+pageTail > e.max {
		e.More = true
		return 0, false
	}
	e.size += entry
	if e.n == 0 {
		e.First = seq
	}
	e.n++
	pb.w.Write(num[:head])
	return head, true
}

// end writes the rest of the entry begin started.
func (e *PageEncoder) end(head int) (bool, error) {
	if _, err := e.pb.w.Write(e.pb.num[head:]); err != nil {
		return false, err // the client is gone
	}
	return true, nil
}

// Finish writes the end of the page and flushes it.
func (e *PageEncoder) Finish() error {
	bw := e.pb.w
	bw.WriteString(`],"has_more":`)
	bw.WriteString(strconv.FormatBool(e.More))
	bw.WriteString(`,"truncated":`)
	bw.WriteString(strconv.FormatBool(e.Truncated))
	bw.WriteString(`,"oldest_seq":`)
	bw.WriteString(strconv.FormatUint(e.Oldest, 10))
	bw.WriteString("}\n")
	return bw.Flush()
}

// Release gives the page's buffers back to the pool.
func (e *PageEncoder) Release() {
	e.pb.w.Reset(nil)
	pageBufs.Put(e.pb)
}
