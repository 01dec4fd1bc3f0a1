package seat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Sends through a running watch.
//
// A one-shot send ([Room.Send] from a process that does not watch)
// would open a connection of its own, after a token and a read of the
// room's log, publish one frame and close: the relay could tell it from
// the cover a watch sends by its connection alone, whatever the frame's
// bytes. So a watch listens on a socket in the home (handoffSocket, mode
// 0600 in the 0700 home: only the home's owner reaches it), and a send
// from another process of the same home hands its message to the watch,
// which sends it on its long-lived connection, between its cover frames,
// as it sends its own. With no watch running, the send goes out on a
// connection of its own, as before.

// handoffSocket is the watch's socket in the home.
const handoffSocket = "watch.sock"

// maxHandoffRequest bounds a request line: a message of MaxTextLen as
// JSON (every byte escaped at worst) and the room's name.
const maxHandoffRequest = 6*MaxTextLen + 4096

// handoffWait bounds how long a send waits for the watch's answer.
const handoffWait = 2 * time.Minute

type handoffRequest struct {
	Room string `json:"room"`
	Text string `json:"text"`
}

type handoffReply struct {
	Seq   uint64 `json:"seq,omitempty"`
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

var errBadHandoff = errors.New("seat: malformed send request")

// decodeHandoffRequest reads one request line.
func decodeHandoffRequest(b []byte) (handoffRequest, error) {
	var r handoffRequest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil || d.More() || r.Room == "" || len(r.Text) > MaxTextLen {
		return handoffRequest{}, errBadHandoff
	}
	return r, nil
}

// handoffErrors are the errors a reply names by code, so the sender gets
// the same error as a send of its own.
var handoffErrors = map[string]error{
	"no_room":        ErrNoRoom,
	"removed":        ErrRemovedRoom,
	"not_member":     ErrNotMember,
	"not_signed_in":  ErrNotSignedIn,
	"bad_request":    errBadHandoff,
	"watch_stopping": errWatchStopping,
}

var errWatchStopping = errors.New("seat: the watch is stopping")

func replyFor(seq uint64, err error) handoffReply {
	if err == nil {
		return handoffReply{Seq: seq}
	}
	for code, e := range handoffErrors {
		if errors.Is(err, e) {
			return handoffReply{Code: code, Error: err.Error()}
		}
	}
	return handoffReply{Error: err.Error()}
}

// serveHandoff takes sends from other processes of this home while ctx
// lasts, unless another watch of the home does already (or the socket
// cannot be made: then sends go out on their own). stop closes the
// socket and waits for the sends in progress.
func (s *Seat) serveHandoff(ctx context.Context) (stop func()) {
	path := filepath.Join(s.cfg.Home, handoffSocket)
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return func() {}
	}
	os.Remove(path) // left by a watch that did not stop cleanly
	ln, err := net.Listen("unix", path)
	if err != nil {
		return func() {}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	s.mu.Lock()
	s.handoff = true
	s.mu.Unlock()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.handleHandoff(ctx, c) })
		}
	})
	return func() {
		cancel()
		ln.Close()
		os.Remove(path)
		wg.Wait()
		s.mu.Lock()
		s.handoff = false
		s.mu.Unlock()
	}
}

func (s *Seat) handleHandoff(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(handoffWait))
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxHandoffRequest), 64<<10).ReadBytes('\n')
	var rep handoffReply
	if req, derr := decodeHandoffRequest(line); err != nil && !errors.Is(err, io.EOF) || derr != nil {
		rep = replyFor(0, errBadHandoff)
	} else if ctx.Err() != nil {
		rep = replyFor(0, errWatchStopping)
	} else {
		rep = replyFor(s.roomSend(ctx, req.Room, req.Text))
	}
	b, _ := json.Marshal(rep)
	c.Write(append(b, '\n'))
}

// sendViaWatch hands a message to a watch of this home running in another
// process. ok is false when there is none (or this process is the watch):
// the caller sends it itself.
func (s *Seat) sendViaWatch(ctx context.Context, name, text string) (seq uint64, ok bool, err error) {
	s.mu.Lock()
	serving := s.handoff
	s.mu.Unlock()
	if serving {
		return 0, false, nil
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	c, err := d.DialContext(dctx, "unix", filepath.Join(s.cfg.Home, handoffSocket))
	cancel()
	if err != nil {
		return 0, false, nil
	}
	defer c.Close()
	dl := time.Now().Add(handoffWait)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.SetDeadline(dl)
	b, _ := json.Marshal(handoffRequest{Room: name, Text: text})
	if _, err := c.Write(append(b, '\n')); err != nil {
		return 0, false, nil // the watch went away before it read anything
	}
	line, err := bufio.NewReader(io.LimitReader(c, 64<<10)).ReadBytes('\n')
	if err != nil {
		// The watch may have sent it: not sent again here.
		return 0, true, fmt.Errorf("seat: the watch of this home did not answer the send: %w", err)
	}
	var rep handoffReply
	if err := json.Unmarshal(line, &rep); err != nil {
		return 0, true, fmt.Errorf("seat: the watch of this home answered the send with %q", line)
	}
	if rep.Code == "watch_stopping" {
		return 0, false, nil // nothing sent: send it ourselves
	}
	if rep.Error != "" {
		if e, ok := handoffErrors[rep.Code]; ok {
			return 0, true, e
		}
		return 0, true, errors.New(rep.Error)
	}
	return rep.Seq, true, nil
}

// watchConn returns the connection of a watch in this process that
// follows ch, if one runs.
func (s *Seat) watchConn(ch string) (*Conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.watchConns[ch]
	return c, c != nil
}

// setWatchConn registers (conn) or clears (nil) the watch connection that
// follows the channels chans.
func (s *Seat) setWatchConn(chans []string, conn *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range chans {
		if conn == nil {
			delete(s.watchConns, ch)
			continue
		}
		if s.watchConns == nil {
			s.watchConns = map[string]*Conn{}
		}
		s.watchConns[ch] = conn
	}
}
