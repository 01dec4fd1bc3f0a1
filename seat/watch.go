package seat

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/padding"
)

// maxWatchRooms is how many rooms one watch follows: the relay's limit of
// subscriptions per connection.
const maxWatchRooms = 50

// Reconnection backoff of a watch.
const (
	watchMinBackoff = 500 * time.Millisecond
	watchMaxBackoff = 30 * time.Second
	// watchBusyBackoff is the least backoff after the relay closed the
	// connection with 1013 Try Again Later.
	watchBusyBackoff = 5 * time.Second
)

// WatchEvent reports a change of a watch's connection.
type WatchEvent struct {
	// Connected is true once the watch is subscribed to every room and
	// has caught up with the relay's log.
	Connected bool
	// Err is why the connection ended, and Retry how long the watch waits
	// before reconnecting (when Connected is false).
	Err   error
	Retry time.Duration
}

// WatchOptions are the callbacks of [Seat.WatchWith]. Both run on the
// watch's goroutine; they must not call back into room operations of the
// same seat.
type WatchOptions struct {
	OnMessage func(RoomMessage)
	OnEvent   func(WatchEvent)
	// OnNotice, if set, is called for each change of the rooms'
	// membership the watch sees (whichever handle of the home made it):
	// a RoomMessage whose Kind is NoticeJoined, NoticeAdded, NoticeLeft,
	// NoticeRemovedMember or NoticeRole, in its place among the messages.
	OnNotice func(RoomMessage)
	// OnCatchUp, if set, is called during each catch-up of a room (when
	// the watch connects) after every page of the relay's log, with the
	// seq reached.
	OnCatchUp func(room string, seq uint64)

	// oneShot, when set, makes the watch a one-shot send's connection
	// (oneshot.go).
	oneShot *oneShot
}

// WatchWith follows rooms live until ctx is done, then returns nil. It
// opens one relay connection subscribed to every room, first catches each
// room up through the relay's full log (commits processed in order), then
// processes pushed entries as they arrive, each stored in one transaction
// with the group state it produced. A dropped connection is reopened with
// backoff, and the rooms are caught up again before live processing
// resumes. While connected it sends cover traffic on every room unless
// [Config].Cover disables it. It returns early only on errors that a retry
// cannot fix: an unknown room, a seat that is not signed in, a revoked
// account, an account that is not (or no longer) a member of a room's
// channel ([ErrNotMember], in a [RoomError] naming the room when the
// watch can tell which).
//
// OnMessage is called for every message that enters the watched rooms'
// history while the watch runs, in the order they are stored: other
// members' messages, and this home's own sends, also those of another
// process sharing the home (which may be the one that fetched a message
// first). Cover frames never reach it.
func (s *Seat) WatchWith(ctx context.Context, rooms []string, o WatchOptions) error {
	// The rooms that wait for this device (stock.go, devicerooms.go), and
	// join offers for those that may come. A one-shot send's connection
	// does not look: it is to look like any connection of a watch, and
	// most of those are the ones a watch opens again after a lifetime.
	if o.oneShot == nil {
		s.arrivals(ctx)
		s.Restock(ctx)
	}
	chans, err := s.watchChannels(ctx, rooms)
	if err != nil {
		return err
	}
	f, err := s.newFeed(ctx, chans, o.OnMessage)
	if f != nil {
		f.onNotice = o.OnNotice
	}
	if err != nil {
		return err
	}
	o.OnMessage = nil
	// Sends from other processes of this home go out on this watch's
	// connection (handoff.go).
	defer s.serveHandoff(ctx)()
	// A watch runs for long: what it deletes (spent KeyPackages, the
	// state it replaced) leaves the WAL at the next checkpoint, as on
	// the servers, not only when the home closes.
	cctx, stopCheckpoints := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	cwg.Go(func() { sqlitedb.RunCheckpoints(cctx, s.st.db, sqlitedb.DefaultCheckpointInterval, func(error) {}) })
	defer cwg.Wait()
	defer stopCheckpoints()
	backoff := watchMinBackoff
	for {
		start := time.Now()
		connected, err := s.watchOnce(ctx, chans, len(rooms) == 0, o, f)
		// A one-shot send's watch ends with the connection that carried
		// the message (its send has finished by now).
		if one := o.oneShot; one != nil && one.sent {
			return one.err
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errLifetimeOver) {
			// Open the next connection at once, as a watch does after
			// a lifetime (cover.Config.MeanLifetime).
			backoff = watchMinBackoff
			continue
		}
		if errors.Is(err, errRoomsChanged) {
			// A watch of every room follows the rooms it just joined.
			if chans, err = s.watchChannels(ctx, rooms); err != nil {
				return err
			}
			for _, ch := range chans {
				f.rooms[ch] = true
			}
			continue
		}
		if permanentWatchError(err) {
			return err
		}
		// A connection that held for a while starts the backoff over; one
		// that keeps dropping right after connecting does not.
		if connected && time.Since(start) > 10*time.Second {
			backoff = watchMinBackoff
		}
		if errors.Is(err, ErrTryAgainLater) {
			// The relay is full: coming back at once would only
			// close another idle socket.
			backoff = max(backoff, watchBusyBackoff)
		}
		// Jitter keeps many watchers from reconnecting in step.
		wait := backoff/2 + time.Duration(mrand.Int64N(int64(backoff/2)+1))
		if o.OnEvent != nil {
			o.OnEvent(WatchEvent{Err: err, Retry: wait})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, watchMaxBackoff)
	}
}

// watchChannels resolves room names, or lists every room, and checks this
// home has each.
func (s *Seat) watchChannels(ctx context.Context, names []string) ([]string, error) {
	if _, err := s.apiKey(ctx); err != nil {
		return nil, err
	}
	var chans []string
	if len(names) == 0 {
		rooms, err := s.Rooms(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range rooms {
			chans = append(chans, r.Channel)
		}
		if len(chans) == 0 {
			return nil, ErrNoRooms
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		ch, err := s.roomChannel(ctx, n)
		if err != nil {
			return nil, err
		}
		if _, err := s.loadRoom(ctx, ch); err != nil {
			return nil, fmt.Errorf("%w: %s", err, ch)
		}
		if !seen[ch] {
			seen[ch] = true
			chans = append(chans, ch)
		}
	}
	if len(chans) > maxWatchRooms {
		return nil, fmt.Errorf("seat: a watch follows at most %d rooms", maxWatchRooms)
	}
	return chans, nil
}

func permanentWatchError(err error) bool {
	var ae *APIError
	var fe *FrameError
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNoRoom), errors.Is(err, ErrNotSignedIn), errors.Is(err, ErrNoSeed),
		errors.Is(err, ErrNoRelayURL), errors.Is(err, ErrNoDirectoryURL), errors.Is(err, ErrNotMember):
		return true
	case errors.As(err, &ae):
		return ae.Status == 401 || ae.Status == 403 || ae.Status == 404
	case errors.As(err, &fe):
		return fe.Code == "forbidden" || fe.Code == "invalid_channel" || fe.Code == "too_many_subscriptions"
	}
	return false
}

// watchOnce runs one connection: subscribe, catch up, then live. It
// reports whether it got as far as live.
// errRoomsChanged ends a connection of a watch of every room that joined
// rooms meanwhile.
var errRoomsChanged = errors.New("seat: the watch joined rooms")

// errLifetimeOver ends a connection whose lifetime is over.
var errLifetimeOver = errors.New("seat: the connection's lifetime is over")

// arrivalsEvery is how often a watch of every room looks for rooms that
// wait for this device.
const arrivalsEvery = 30 * time.Second

func (s *Seat) watchOnce(ctx context.Context, chans []string, everyRoom bool, o WatchOptions, f *feed) (bool, error) {
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return false, err
	}
	conn, err := rc.Dial(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		// Keep the read loop unblocked while the connection closes.
		go func() {
			for range conn.Pushes() {
			}
		}()
		conn.Close()
	}()
	// Subscribe first, then catch up: an entry published in between is
	// both in the log and pushed, and applying it twice is a no-op.
	for _, ch := range chans {
		if err := conn.Subscribe(ctx, ch); err != nil {
			if errors.Is(err, ErrNotMember) {
				return false, &RoomError{Room: ch, Err: err}
			}
			return false, err
		}
	}
	scheds := map[string]*cover.Scheduler{}
	onMsg := func(m RoomMessage) {
		if m.Kind == noticeMembers {
			return // not traffic: cover does not follow it
		}
		if sc := scheds[m.Room]; sc != nil {
			// Cover sizes follow the room's real traffic.
			sc.Observe(roomBlockSize(len(m.Text) + 1))
		}
	}
	for _, ch := range chans {
		if err := s.syncRoom(ctx, ch, onMsg, o.OnCatchUp); err != nil {
			return false, err
		}
		if err := f.emit(ctx); err != nil {
			return false, err
		}
	}
	s.setWatchConn(chans, conn, true)
	defer s.setWatchConn(chans, conn, false)
	if o.OnEvent != nil {
		o.OnEvent(WatchEvent{Connected: true})
	}

	// On return: stop the cover senders, wait for them, then close.
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	coverErr := make(chan error, len(chans))
	if !s.cfg.Cover.Disabled {
		defer s.startCover(cctx, conn, chans, scheds, &wg, coverErr)()
	}
	// The connection lasts a lifetime drawn from the distribution every
	// connection of a watch has (none: as long as the watch runs).
	var lifeOver <-chan time.Time
	var sendAt <-chan time.Time
	if life := s.cfg.Cover.Lifetime(); life > 0 {
		lt := time.NewTimer(life)
		defer lt.Stop()
		lifeOver = lt.C
		if o.oneShot != nil && !o.oneShot.sent {
			st := time.NewTimer(s.cfg.Cover.Within(life))
			defer st.Stop()
			sendAt = st.C
		}
	} else if o.oneShot != nil && !o.oneShot.sent {
		now := make(chan time.Time, 1)
		now <- time.Now()
		sendAt = now
	}
	sendDone := make(chan struct{})
	sendWait := sendDone // nil once seen closed
	ending := false      // the lifetime is over, the send not yet done
	// Another process sharing the home may store a message without a
	// push reaching this connection (its own sends): look now and then.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastArrivals := time.Now()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case err := <-coverErr:
			return true, err
		case <-lifeOver:
			if o.oneShot != nil && o.oneShot.sent && sendWait != nil {
				// The send is still waiting for its ack: the connection
				// ends when it has it (this loop keeps taking pushes).
				lifeOver, ending = nil, true
				continue
			}
			return true, errLifetimeOver
		case <-sendAt:
			// In a goroutine: the publish waits for its ack, which the
			// connection's reader delivers while this loop takes pushes.
			o.oneShot.sent = true
			wg.Go(func() {
				defer close(sendDone)
				o.oneShot.seq, o.oneShot.err = s.roomSend(cctx, o.oneShot.room, o.oneShot.text)
			})
			if lifeOver == nil {
				<-sendDone
				return true, o.oneShot.err
			}
		case <-sendWait:
			sendWait = nil
			if o.oneShot.err != nil {
				return true, o.oneShot.err
			}
			if ending {
				return true, errLifetimeOver
			}
		case <-tick.C:
			if everyRoom && time.Since(lastArrivals) > arrivalsEvery {
				lastArrivals = time.Now()
				if len(s.arrivals(ctx)) > 0 {
					return true, errRoomsChanged
				}
			}
		case p, ok := <-conn.Pushes():
			if !ok {
				return true, notMemberRoom(conn.Err(), chans)
			}
			if !slices.Contains(chans, p.Channel) {
				// The sync channel, which a push through this
				// connection subscribed it to (watchpub.go): the
				// other devices' batches are for a pull.
				continue
			}
			if err := s.applyPush(ctx, p, onMsg); err != nil {
				return true, err
			}
		}
		if err := f.emit(ctx); err != nil {
			return true, err
		}
	}
}

// startCover starts a cover sender on conn for each of chans, under ctx
// and counted in wg, and keeps each in scheds (and as the watch's, for
// one-shot sends handed over); a sender's error goes to errs. The func it
// returns forgets the senders again, before ctx ends and wg is waited for.
func (s *Seat) startCover(ctx context.Context, conn *Conn, chans []string, scheds map[string]*cover.Scheduler, wg *sync.WaitGroup, errs chan<- error) (forget func()) {
	for _, ch := range chans {
		sc := cover.New(s.cfg.Cover, func(ctx context.Context, size int) error {
			return s.sendCover(ctx, conn, ch, size)
		})
		scheds[ch] = sc
		s.setWatchScheduler(ch, sc)
		wg.Go(func() {
			if err := sc.Run(ctx); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	return func() {
		for _, ch := range chans {
			s.setWatchScheduler(ch, nil)
		}
	}
}

// notMemberRoom names the room of a not_a_member error that ended a
// watch's connection, when the frame or the watch tells which.
func notMemberRoom(err error, chans []string) error {
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrNotMember) {
		return err
	}
	switch {
	case fe.Channel != "":
		return &RoomError{Room: fe.Channel, Err: err}
	case len(chans) == 1:
		return &RoomError{Room: chans[0], Err: err}
	}
	return err
}

// feed delivers a watch's messages from the history table, so a message
// is delivered once whichever handle of the home stored it.
type feed struct {
	s     *Seat
	on    func(RoomMessage)
	rooms map[string]bool
	last  int64 // rowid of the last history row looked at

	// onNotice, if set, gets the membership notices (NoticeJoined and
	// the others), in their place among the messages.
	onNotice func(RoomMessage)
}

// newFeed starts a feed of the rooms chans from now on.
func (s *Seat) newFeed(ctx context.Context, chans []string, on func(RoomMessage)) (*feed, error) {
	f := &feed{s: s, on: on, rooms: map[string]bool{}}
	for _, ch := range chans {
		f.rooms[ch] = true
	}
	err := s.st.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(rowid), 0) FROM room_history`).Scan(&f.last)
	return f, err
}

func (f *feed) emit(ctx context.Context) error {
	all, last, err := f.s.history(ctx, `WHERE rowid > ? ORDER BY rowid`, f.last)
	if err != nil {
		return err
	}
	if len(all) > 0 {
		f.last = last
	}
	var out []RoomMessage
	for _, m := range all {
		switch {
		case !f.rooms[m.Room]:
		case m.Kind != noticeMembers:
			out = append(out, m)
		case f.onNotice != nil:
			out = append(out, splitNotices(m)...)
		}
	}
	if err := f.s.withNames(ctx, out); err != nil {
		return err
	}
	for _, m := range out {
		switch {
		case isMembershipNotice(m.Kind):
			f.onNotice(m)
		case f.on != nil:
			f.on(m)
		}
	}
	return nil
}

// syncRoom catches one room up through the relay's full log.
func (s *Seat) syncRoom(ctx context.Context, ch string, onMsg func(RoomMessage), onPage func(string, uint64)) error {
	return s.withRoom(ctx, ch, func(r *room) error {
		if onPage != nil {
			r.onPage = func(seq uint64) { onPage(ch, seq) }
		}
		return s.catchUpSettled(ctx, r, onMsg)
	})
}

// withRoom runs f on the room loaded under the room lock; if another
// process changed the room meanwhile (errRoomMoved), it reloads and runs f
// again.
func (s *Seat) withRoom(ctx context.Context, ch string, f func(*room) error) error {
	s.lockRooms()
	defer s.unlockRooms()
	for attempt := 0; ; attempt++ {
		r, err := s.loadRoom(ctx, ch)
		if errors.Is(err, ErrNoRoom) && attempt == 0 && (s.joinPendingDevice(ctx, ch) || s.joinFromInbox(ctx, ch)) {
			r, err = s.loadRoom(ctx, ch)
		}
		if err != nil {
			return err
		}
		err = f(r)
		if !errors.Is(err, errRoomMoved) || attempt == 4 {
			return err
		}
	}
}

// applyPush applies one pushed entry. If entries are missing before it
// (seqs the relay does not push to this connection, such as this seat's
// own frames), the room is caught up through the log first. The relay may
// push an application message before its log shows it, so the pushed entry
// itself is applied from the push; a gap the log never fills (a relay
// crash can leave one) is skipped after a few tries.
func (s *Seat) applyPush(ctx context.Context, p Push, onMsg func(RoomMessage)) error {
	return s.withRoom(ctx, p.Channel, func(r *room) error {
		for try := 0; p.Seq > r.lastSeq+1 && try < 4; try++ {
			if try > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(try) * 50 * time.Millisecond):
				}
			}
			if err := s.catchUpTo(ctx, r, p.Seq, onMsg); err != nil {
				return err
			}
		}
		if err := s.apply(ctx, r, p.RelayEntry, onMsg); err != nil {
			return err
		}
		// Application messages and cover, most of what is pushed, leave
		// nothing to settle: the look (some reads of the home's database,
		// perhaps a commit) is for handshakes, offers and gaps. A name
		// changed while the watch runs is told at the next catch-up or
		// commit.
		if !r.handshake && !r.gap && len(r.offers) == 0 {
			return nil
		}
		return s.settle(ctx, r)
	})
}

// sendCover sends one cover frame of the given padded block size on the
// watch connection: a real MLS application message whose plaintext is the
// cover kind followed by zeros, so the relay sees the frame shape of a real
// message of that size. The advanced group state is stored before the frame
// leaves, so a crash can never reuse a message key.
func (s *Seat) sendCover(ctx context.Context, conn *Conn, ch string, size int) error {
	var ct []byte
	err := s.withRoom(ctx, ch, func(r *room) error {
		if !r.g.Active() {
			return nil
		}
		var err error
		if ct, err = r.g.Protect(coverPlaintext(size), nil); err != nil {
			// The group cannot send now (a proposal waits for a commit):
			// skip this frame; real sends fail the same way.
			ct = nil
			return nil
		}
		return s.saveRoom(ctx, r, false)
	})
	if err != nil || ct == nil {
		return err
	}
	seq, err := conn.Publish(ctx, ch, ct)
	if err != nil {
		return err
	}
	// The relay does not push a frame back to its sender: if nothing came
	// before it that this seat has not seen, move the cursor past it.
	return s.withRoom(ctx, ch, func(r *room) error {
		if r.lastSeq+1 != seq {
			return nil
		}
		r.lastSeq = seq
		return s.saveRoom(ctx, r, false)
	})
}

// appContentLen is the length of an application message's content with
// its authentication data in a PrivateMessage (RFC 9420 §6.3.1), before
// padding: application_data<V> and the Ed25519 signature<V>.
func appContentLen(n int) int { return varintLen(n) + n + varintLen(64) + 64 }

func varintLen(n int) int {
	switch {
	case n < 1<<6:
		return 1
	case n < 1<<14:
		return 2
	default:
		return 4
	}
}

// roomBlockSize is the padded block size of a room message whose
// plaintext (kind byte included) is n bytes long.
func roomBlockSize(n int) int { return padding.Size(appContentLen(n)) }

// coverPlaintext returns a cover plaintext that pads to exactly size, the
// largest such, so cover of a block size looks like real messages of it.
func coverPlaintext(size int) []byte {
	n := 1
	for l := size - padding.HeaderLen - appContentLen(0); l > 1; l-- {
		if roomBlockSize(l) == size {
			n = l
			break
		}
	}
	p := make([]byte, n)
	p[0] = roomCover
	return p
}

// setWatchScheduler registers the cover scheduler of a watched room, so
// sends through [Room.Send] feed its size distribution.
func (s *Seat) setWatchScheduler(ch string, sc *cover.Scheduler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc == nil {
		delete(s.watching, ch)
		return
	}
	if s.watching == nil {
		s.watching = map[string]*cover.Scheduler{}
	}
	s.watching[ch] = sc
}

// observeSend reports a real send's block size to a watch of the room.
func (s *Seat) observeSend(ch string, plaintextLen int) {
	s.mu.Lock()
	sc := s.watching[ch]
	s.mu.Unlock()
	if sc != nil {
		sc.Observe(roomBlockSize(plaintextLen))
	}
}
