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
	"slices"
	"sync"
	"time"
)

// Operations through a running watch.
//
// A one-shot operation (a [Room.Send], a [Seat.Push], a room's commit,
// from a process that does not watch) would open a connection of its
// own, after a token and a read of the room's log, publish and close:
// the relay could tell it from the cover a watch sends by its connection
// alone, whatever the frame's bytes. So a watch listens on a socket in
// the home (handoffSocket, mode 0600 in the 0700 home, and on Linux
// answering only its own user: only the home's owner reaches it), and
// another process of the same home hands the operation to the watch,
// which performs it as it performs its own: what it publishes on the
// rooms it follows, and a push of the log, leave on its long-lived
// connection, between its cover frames (watchpub.go). The caller gets
// what the operation returned, its errors matching the same sentinels
// and typed errors as if it had performed it itself. With no watch
// running, the operation runs in the caller, as before.
//
// One request per connection: a line of JSON, a handoffRequest whose
// kind says the operation, with the fields that kind takes and no other;
// the answer is a line of JSON, a handoffReply.
//
// Not handed over: joins (a room not in the home yet is no room the
// watch follows, and a join waits for its admission for up to minutes),
// and what only the directory sees (invites by the owner, declines).

// handoffSocket is the watch's socket in the home.
const handoffSocket = "watch.sock"

// maxHandoffRequest bounds a request line: a message of MaxTextLen as
// JSON (every byte escaped at worst) and the room's name.
const maxHandoffRequest = 6*MaxTextLen + 4096

// maxHandoffField bounds the other string fields of a request (a room's
// name, a member's identity, an add-token).
const maxHandoffField = 1024

// maxHandoffReply bounds a reply line: an admit of a channel's 1000
// pending join requests, and an error's text.
const maxHandoffReply = 4 << 20

// handoffWait bounds how long an operation waits for the watch's answer,
// and how long the watch lets it run.
const handoffWait = 2 * time.Minute

// Kinds of request.
const (
	handSend        = "send"         // Room.Send: room, text
	handPush        = "push"         // Seat.Push: nothing else
	handAdd         = "add"          // Room.Add: room, member and/or token
	handAdmit       = "admit"        // Room.Admit: room
	handRemove      = "remove"       // Room.Remove: room, member
	handLeave       = "leave"        // Room.Leave: room
	handAddAdmin    = "add_admin"    // Room.AddAdmin: room, member
	handRemoveAdmin = "remove_admin" // Room.RemoveAdmin: room, member
	handAutoInvite  = "auto_invite"  // Room.Invite with Auto: room, uses, ttl
	handRejoin      = "rejoin"       // Room.Rejoin: room
)

type handoffRequest struct {
	Kind   string        `json:"kind"`
	Room   string        `json:"room,omitempty"`
	Text   string        `json:"text,omitempty"`
	Member string        `json:"member,omitempty"`
	Token  string        `json:"token,omitempty"`
	Uses   int           `json:"uses,omitempty"`
	TTL    time.Duration `json:"ttl,omitempty"`
}

type handoffReply struct {
	Seq      uint64     `json:"seq,omitempty"`
	Pushed   int        `json:"pushed,omitempty"`
	Batches  int        `json:"batches,omitempty"`
	Added    []Added    `json:"added,omitempty"`
	Admitted []Admitted `json:"admitted,omitempty"`
	Removal  *Removal   `json:"removal,omitempty"`
	Token    string     `json:"token,omitempty"`

	// Code is the handoff's own refusal, when the operation was not
	// performed: bad_request, watch_stopping.
	Code string `json:"code,omitempty"`
	// Error is the operation's error text; Is the sentinels it matches
	// (handoffErrors), API and Frame the typed errors it holds, Room the
	// room of a RoomError it was.
	Error string        `json:"error,omitempty"`
	Is    []string      `json:"is,omitempty"`
	API   *handedAPIErr `json:"api,omitempty"`
	Frame *FrameError   `json:"frame,omitempty"`
	Room  string        `json:"error_room,omitempty"`
}

// handedAPIErr is an APIError on the socket.
type handedAPIErr struct {
	Status     int           `json:"status"`
	Code       string        `json:"code"`
	Message    string        `json:"message"`
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

var errBadHandoff = errors.New("seat: malformed request to the watch")

// decodeHandoffRequest reads one request line: one JSON object of a known
// kind with the fields that kind takes, each within its bound.
func decodeHandoffRequest(b []byte) (handoffRequest, error) {
	var r handoffRequest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil || d.More() {
		return handoffRequest{}, errBadHandoff
	}
	if len(r.Text) > MaxTextLen || len(r.Room) > maxHandoffField || len(r.Member) > maxHandoffField || len(r.Token) > maxHandoffField {
		return handoffRequest{}, errBadHandoff
	}
	room, text, member, token, uses := r.Room != "", r.Text != "", r.Member != "", r.Token != "", r.Uses != 0 || r.TTL != 0
	var ok bool
	switch r.Kind {
	case handSend:
		ok = room && !member && !token && !uses // the text may be empty
	case handPush:
		ok = !room && !text && !member && !token && !uses
	case handAdd:
		ok = room && !text && (member || token) && !uses
	case handAdmit, handLeave, handRejoin:
		ok = room && !text && !member && !token && !uses
	case handRemove, handAddAdmin, handRemoveAdmin:
		ok = room && !text && member && !token && !uses
	case handAutoInvite:
		ok = room && !text && !member && !token && r.Uses >= 0 && r.TTL >= 0
	}
	if !ok {
		return handoffRequest{}, errBadHandoff
	}
	return r, nil
}

// handoffErrors are the sentinels a reply names by code, so the caller's
// error matches what it would have matched had it performed the
// operation itself.
var handoffErrors = map[string]error{
	"no_room":             ErrNoRoom,
	"removed":             ErrRemovedRoom,
	"not_member":          ErrNotMember,
	"not_signed_in":       ErrNotSignedIn,
	"no_seed":             ErrNoSeed,
	"no_directory_url":    ErrNoDirectoryURL,
	"no_relay_url":        ErrNoRelayURL,
	"name":                ErrName,
	"not_did_key":         ErrNotDIDKey,
	"closed":              ErrClosed,
	"too_large":           ErrTooLarge,
	"stale_epoch":         ErrStaleEpoch,
	"try_again_later":     ErrTryAgainLater,
	"rate_limited":        ErrRateLimited,
	"room_exists":         ErrRoomExists,
	"room_live":           ErrRoomLive,
	"not_owner":           ErrNotOwner,
	"no_rooms":            ErrNoRooms,
	"suite":               ErrSuite,
	"fence_ahead":         ErrFenceAhead,
	"tree_mismatch":       ErrTreeMismatch,
	"tree_unavailable":    ErrTreeUnavailable,
	"not_admin":           ErrNotAdmin,
	"remove_owner":        ErrRemoveOwner,
	"no_roles":            ErrNoRoles,
	"invite_not_admitted": ErrInviteNotAdmitted,
	"invite_expired":      ErrInviteExpired,
	"invite_used":         ErrInviteUsed,
	"not_allowed":         ErrNotAllowed,
	"invalid_add_token":   ErrInvalidAddToken,
	"no_stock":            ErrNoStock,
	"not_the_person":      ErrNotThePerson,
	"revoked_device":      ErrRevokedDevice,
	"revoked":             ErrRevoked,
	"linked_home":         ErrLinkedHome,
	"stale_retries":       errStaleRetries,
	"deadline_exceeded":   context.DeadlineExceeded,
	"canceled":            context.Canceled,
}

var errWatchStopping = errors.New("seat: the watch is stopping")

// replyErr is the reply of an operation that failed with err.
func replyErr(err error) handoffReply {
	var rep handoffReply
	if re, ok := err.(*RoomError); ok {
		rep.Room, err = re.Room, re.Err
	}
	rep.Error = err.Error()
	for code, e := range handoffErrors {
		if errors.Is(err, e) {
			rep.Is = append(rep.Is, code)
		}
	}
	slices.Sort(rep.Is)
	var ae *APIError
	if errors.As(err, &ae) {
		rep.API = &handedAPIErr{Status: ae.Status, Code: ae.Code, Message: ae.Message, RetryAfter: ae.RetryAfter}
	}
	var fe *FrameError
	if errors.As(err, &fe) {
		f := *fe
		rep.Frame = &f
	}
	return rep
}

// handedError is an operation's error as the watch that performed it
// answered: its text, and the errors it matches.
type handedError struct {
	msg  string
	errs []error
}

func (e *handedError) Error() string   { return e.msg }
func (e *handedError) Unwrap() []error { return e.errs }

// err is the operation's error the reply carries, or nil.
func (rep *handoffReply) err() error {
	if rep.Error == "" && rep.Code == "" {
		return nil
	}
	var errs []error
	if a := rep.API; a != nil {
		errs = append(errs, &APIError{Status: a.Status, Code: a.Code, Message: a.Message, RetryAfter: a.RetryAfter})
	}
	if rep.Frame != nil {
		f := *rep.Frame
		errs = append(errs, &f)
	}
	for _, code := range rep.Is {
		if e, ok := handoffErrors[code]; ok {
			errs = append(errs, e)
		}
	}
	msg := rep.Error
	if msg == "" {
		msg = "seat: the watch of this home refused the request (" + rep.Code + ")"
	}
	var err error = &handedError{msg: msg, errs: errs}
	if rep.Room != "" {
		err = &RoomError{Room: rep.Room, Err: err}
	}
	return err
}

// serveHandoff takes operations from other processes of this home while
// ctx lasts, unless another watch of the home does already (or the socket
// cannot be made: then they run on their own). stop closes the socket and
// waits for the operations in progress.
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
	if !peerIsOwner(c) {
		return // another user: no answer at all
	}
	c.SetDeadline(time.Now().Add(handoffWait))
	// A line ends with its newline: one cut off by the bound, or by the
	// end of the stream, is refused.
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxHandoffRequest), 64<<10).ReadBytes('\n')
	var rep handoffReply
	if req, derr := decodeHandoffRequest(line); err != nil || derr != nil {
		rep = handoffReply{Code: "bad_request", Error: errBadHandoff.Error()}
	} else if ctx.Err() != nil {
		rep = handoffReply{Code: "watch_stopping", Error: errWatchStopping.Error()}
	} else {
		octx, cancel := context.WithTimeout(ctx, handoffWait)
		rep = s.perform(octx, req)
		cancel()
	}
	b, _ := json.Marshal(rep)
	c.Write(append(b, '\n'))
}

// perform runs the operation req asks for in this process.
func (s *Seat) perform(ctx context.Context, req handoffRequest) handoffReply {
	var rep handoffReply
	var err error
	switch req.Kind {
	case handSend:
		rep.Seq, err = s.roomSend(ctx, req.Room, req.Text)
	case handPush:
		rep.Pushed, err = s.push(ctx, func(_, total int) { rep.Batches = total })
	case handAdd:
		rep.Added, err = s.addPerson(ctx, req.Room, req.Member, req.Token)
	case handAdmit:
		rep.Admitted, err = s.admitJoiners(ctx, req.Room)
	case handRemove:
		var rm Removal
		rm, err = s.removeMember(ctx, req.Room, req.Member)
		rep.Removal = &rm
	case handLeave:
		err = s.leaveRoom(ctx, req.Room)
	case handAddAdmin:
		err = s.addAdmin(ctx, req.Room, req.Member)
	case handRemoveAdmin:
		err = s.removeAdmin(ctx, req.Room, req.Member)
	case handAutoInvite:
		rep.Token, err = s.autoInviteTo(ctx, req.Room, req.Uses, req.TTL)
	case handRejoin:
		err = s.rejoinRoom(ctx, req.Room)
	}
	if err != nil {
		e := replyErr(err)
		// What the operation did before it failed is returned with
		// its error, as a call of its own returns it.
		e.Seq, e.Pushed, e.Batches, e.Added, e.Admitted, e.Removal, e.Token = rep.Seq, rep.Pushed, rep.Batches, rep.Added, rep.Admitted, rep.Removal, rep.Token
		return e
	}
	return rep
}

// handOff hands the operation req to a watch of this home running in
// another process. ok is false when there is none (or this process is
// the watch), or it did not perform it (it is stopping, or does not know
// the request: a watch of an older version): the caller performs it
// itself. The operation's error is rep.err().
func (s *Seat) handOff(ctx context.Context, req handoffRequest) (rep handoffReply, ok bool) {
	s.mu.Lock()
	serving := s.handoff
	s.mu.Unlock()
	if serving {
		return rep, false
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	c, err := d.DialContext(dctx, "unix", filepath.Join(s.cfg.Home, handoffSocket))
	cancel()
	if err != nil {
		return rep, false
	}
	defer c.Close()
	dl := time.Now().Add(handoffWait)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.SetDeadline(dl)
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return rep, false // the watch went away before it read anything
	}
	line, err := bufio.NewReader(io.LimitReader(c, maxHandoffReply)).ReadBytes('\n')
	if err != nil {
		// The watch may have performed it: not again here.
		return handoffReply{Error: fmt.Sprintf("seat: the watch of this home did not answer the %s: %v", req.Kind, err)}, true
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return handoffReply{Error: fmt.Sprintf("seat: the watch of this home answered the %s with %q", req.Kind, line)}, true
	}
	if rep.Code == "watch_stopping" || rep.Code == "bad_request" {
		return handoffReply{}, false // nothing performed
	}
	return rep, true
}

// watchConn returns the connection of a watch in this process that
// follows ch, if one runs.
func (s *Seat) watchConn(ch string) (*Conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.watchConns[ch]
	return c, c != nil
}

// setWatchConn registers (live) or clears the watch connection conn that
// follows the channels chans.
func (s *Seat) setWatchConn(chans []string, conn *Conn, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !live {
		for _, ch := range chans {
			if s.watchConns[ch] == conn {
				delete(s.watchConns, ch)
			}
		}
		delete(s.watchSubs, conn)
		return
	}
	if s.watchConns == nil {
		s.watchConns = map[string]*Conn{}
		s.watchSubs = map[*Conn]map[string]bool{}
	}
	for _, ch := range chans {
		s.watchConns[ch] = conn
	}
	s.watchSubs[conn] = map[string]bool{}
}
