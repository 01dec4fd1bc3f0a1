package relay

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/skytale-oss/skytale/internal/filedamage"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

const chLog = "acme/payments/ledger"

// logEntry is an entry published to the archive and acknowledged.
type logEntry struct {
	ch      string
	seq     uint64
	payload []byte
	et      int
}

// logPublisher publishes a known sequence of entries and remembers what
// was acknowledged.
type logPublisher struct {
	t     *testing.T
	c     *wsClient
	gid   []byte
	epoch map[string]uint64 // the epoch of each channel's next commit
	acked []logEntry
	n     int
	plain bool // no proposals or Welcomes
}

func newLogPublisher(t *testing.T, base string, epochs map[string]uint64) *logPublisher {
	t.Helper()
	c := dialWS(t, base, "/ws")
	c.auth(mint(t, "alice", ""))
	c.subscribe(chA)
	c.subscribe(chLog)
	if epochs == nil {
		epochs = map[string]uint64{}
	}
	return &logPublisher{t: t, c: c, gid: []byte("log-group"), epoch: epochs}
}

// entry returns the payload of the publisher's next entry on ch: a commit
// at the channel's next epoch when commit is set, else mostly application
// entries of size bytes, with now and then a proposal or a Welcome.
func (p *logPublisher) entry(ch string, commit bool, size int) ([]byte, int) {
	p.n++
	tag := fmt.Sprintf(" entry %d on %s ", p.n, ch)
	switch {
	case commit:
		b := append(publicMessage(p.gid, p.epoch[ch], 3), tag...)
		p.epoch[ch]++
		return b, EntryCommit
	case p.plain:
	case p.n%61 == 7:
		return append(publicMessage(p.gid, p.epoch[ch], 2), tag...), EntryCommit
	case p.n%97 == 5:
		return append(welcome(), tag...), EntryWelcome
	}
	b := bytes.Repeat([]byte{byte(p.n)}, size)
	copy(b, tag)
	return b, EntryApp
}

// publish publishes n entries to ch, up to 32 in flight, every commitEvery
// one a commit (0 for none), and the last one a commit when lastCommit.
// Every publish must be acknowledged.
func (p *logPublisher) publish(ch string, n, size, commitEvery int, lastCommit bool) {
	p.t.Helper()
	var pending []logEntry
	ack := func() {
		p.t.Helper()
		m := p.c.recv()
		if m["type"] != "ok" || m["message"] != "published" {
			p.t.Fatalf("publish %d on %s refused: %v", len(p.acked), ch, m)
		}
		e := pending[0]
		pending = pending[1:]
		e.seq = uint64(m["seq"].(float64))
		p.acked = append(p.acked, e)
	}
	for i := range n {
		commit := commitEvery > 0 && i%commitEvery == commitEvery-1 || lastCommit && i == n-1
		b, et := p.entry(ch, commit, size)
		p.c.publish(ch, b)
		pending = append(pending, logEntry{ch: ch, payload: b, et: et})
		if len(pending) == 32 {
			ack()
		}
	}
	for len(pending) > 0 {
		ack()
	}
}

// maxSeq is the highest seq acknowledged on ch.
func (p *logPublisher) maxSeq(ch string) uint64 {
	var m uint64
	for _, e := range p.acked {
		if e.ch == ch {
			m = max(m, e.seq)
		}
	}
	return m
}

// readApp reads a channel's application entries through GET /v1/messages.
func readApp(t *testing.T, base, ch, tok string) map[uint64][]byte {
	t.Helper()
	got := make(map[uint64][]byte)
	for seq, e := range readPages(t, base, "messages", ch, tok) {
		got[seq] = e.payload
	}
	return got
}

// checkServed checks that every entry of want is served, with its payload
// and type, by GET /v1/sync and (application entries) GET /v1/messages,
// and that nothing else is.
func checkServed(t *testing.T, base string, want []logEntry) {
	t.Helper()
	tok := mint(t, "reader", "")
	byCh := map[string][]logEntry{}
	for _, e := range want {
		byCh[e.ch] = append(byCh[e.ch], e)
	}
	for _, ch := range []string{chA, chLog} {
		all := readChannel(t, base, ch, tok)
		app := readApp(t, base, ch, tok)
		nApp := 0
		for _, e := range byCh[ch] {
			got, ok := all[e.seq]
			if !ok || !bytes.Equal(got.payload, e.payload) || got.et != e.et {
				t.Fatalf("%s seq %d: /v1/sync serves %q (type %d, %v), want %q (type %d)",
					ch, e.seq, clip(got.payload), got.et, ok, clip(e.payload), e.et)
			}
			if e.et == EntryApp {
				nApp++
				if !bytes.Equal(app[e.seq], e.payload) {
					t.Fatalf("%s seq %d: /v1/messages serves %q, want %q", ch, e.seq, clip(app[e.seq]), clip(e.payload))
				}
			}
		}
		if len(all) != len(byCh[ch]) || len(app) != nApp {
			t.Fatalf("%s serves %d entries (%d application), want %d (%d)", ch, len(all), len(app), len(byCh[ch]), nApp)
		}
	}
}

func clip(b []byte) []byte { return b[:min(len(b), 40)] }

// checkFence checks that ch's commit fence expects epoch want: commits
// at other epochs are refused as stale, with want in the refusal.
func checkFence(t *testing.T, c *wsClient, gid []byte, ch string, want uint64) {
	t.Helper()
	for _, e := range []uint64{want + 1000, want - 1, 0} {
		if e == want || e > want+1000 {
			continue
		}
		c.publish(ch, publicMessage(gid, e, 3))
		m := c.expectError("stale_epoch")
		if got := uint64(m["epoch"].(float64)); got != want {
			t.Fatalf("%s: a commit at epoch %d is refused expecting %d, want %d", ch, e, got, want)
		}
	}
}

// openIndex opens a stopped relay's archive file as any SQLite client.
func openIndex(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func execSQL(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var v sql.NullInt64
	if err := db.QueryRow(q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v.Int64
}

// logSegments lists the segments in a file-backed archive's log directory.
func logSegments(t *testing.T, path string) []uint64 {
	t.Helper()
	ents, err := os.ReadDir(logDir(path))
	if err != nil {
		t.Fatal(err)
	}
	var segs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			t.Fatalf("log file %s", e.Name())
		}
		segs = append(segs, n)
	}
	slices.Sort(segs)
	return segs
}

// diskRecord is a record read back from a stopped relay's log.
type diskRecord struct {
	seg      uint64
	off, end int64
	at       int64
	rec      seglog.Record
}

// logRecords reads every record of a stopped relay's log, segment by
// segment.
func logRecords(t *testing.T, path string) []diskRecord {
	t.Helper()
	l, segs, err := seglog.Open(logDir(path), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []diskRecord
	for _, seg := range segs {
		off := int64(0)
		_, err := l.Scan(seg, 0, func(r *seglog.Record, at int64) error {
			c := *r
			c.Payload = slices.Clone(r.Payload)
			end := at + int64(len(c.Payload))
			out = append(out, diskRecord{seg: seg, off: off, end: end, at: at, rec: c})
			off = end
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// takeBackIndex makes a stopped relay's index what a machine crash that
// took back its last transactions could leave (they were committed at
// synchronous=NORMAL): the last k rows gone, the channel rows older
// (rows maps a channel to its reserved ceiling and epoch, nil epoch for
// none; a channel missing from rows loses its row), and the applied log
// position back at the start of the first segment.
func takeBackIndex(t *testing.T, path string, k int, rows map[string][2]any) {
	t.Helper()
	db := openIndex(t, path)
	execSQL(t, db, `DELETE FROM messages WHERE id IN (SELECT id FROM messages ORDER BY id DESC LIMIT ?)`, k)
	// The channels' rows go back too, but each keeps its payer: the index
	// has it from the first transaction of the channel's first entries.
	payers := map[string]string{}
	for ch := range rows {
		var p string
		db.QueryRow(`SELECT payer FROM channels WHERE name = ?`, ch).Scan(&p)
		payers[ch] = p
	}
	execSQL(t, db, `DELETE FROM channels`)
	for ch, r := range rows {
		execSQL(t, db, `INSERT INTO channels (name, reserved, epoch, payer) VALUES (?, ?, ?, ?)`, ch, r[0], r[1], payers[ch])
	}
	segs := logSegments(t, path)
	execSQL(t, db, `UPDATE state SET value = ? WHERE key = 'log_seg'`, int64(segs[0]))
	execSQL(t, db, `UPDATE state SET value = 0 WHERE key = 'log_off'`)
	// The usage saved at the last clean stop is off by what went; a
	// replay must not trust it.
	execSQL(t, db, `UPDATE usage SET bytes = 1`)
	db.Close()
}

// storedUsage sums what a relay's archive holds per account, from the
// rows, once the index has caught up with the log.
func storedUsage(t *testing.T, tr *testRelay, sub string) int64 {
	t.Helper()
	settled(t, tr)
	return queryInt(t, tr.db, `SELECT sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel WHERE c.payer = ?`, sub)
}

// checkUsage checks that the usage a relay charges an account is what
// its archive holds.
func checkUsage(t *testing.T, tr *testRelay, sub, when string) {
	t.Helper()
	stored := storedUsage(t, tr, sub) // first: the indexer credits what it deletes
	if got := tr.arch.Used(sub); got != stored {
		t.Fatalf("%s: %s's usage is %d, the archive holds %d", when, sub, got, stored)
	}
}

// startLogFixture starts a file-backed relay and publishes 150 entries
// (40 of them commits) to chA and 20 (7 commits) to chLog, about 0.8 MB.
func startLogFixture(t *testing.T) (string, Config, *testRelay, *logPublisher) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true}
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chA, 150, 5000, 40, false)
	p.publish(chLog, 20, 3000, 7, false)
	return path, cfg, tr, p
}

// TestLogReplayRebuildsIndex stops a relay cleanly, then takes back the
// index's last transactions as a machine crash can (the rows of the last
// acknowledged entries, the channel rows' ceilings and fences, the
// applied position), and reopens it: the replay of the log brings back
// every acknowledged entry with its payload, the fence expects the epoch
// after the last acknowledged commit, the usage is recomputed, and new
// publishes go on above every acknowledged seq.
func TestLogReplayRebuildsIndex(t *testing.T) {
	path, cfg, tr, p := startLogFixture(t)
	// 1.5 MB in all: the log's first segment and part of the second.
	p.publish(chA, 150, 5000, 40, true)
	p.publish(chLog, 20, 3000, 0, true)
	wantEpoch := map[string]uint64{chA: p.epoch[chA], chLog: p.epoch[chLog]}
	p.c.c.CloseNow()
	tr.stop(t)
	if segs := logSegments(t, path); len(segs) < 2 {
		t.Fatalf("the entries are in segments %v: the test needs two", segs)
	}

	// The last 40 rows go: the end of both channels, and commits.
	const k = 40
	takeBackIndex(t, path, k, map[string][2]any{chA: {int64(5), int64(1)}})

	tr = startRelay(t, cfg)
	checkServed(t, tr.URL, p.acked)
	checkUsage(t, tr, "alice", "after the replay")
	c := newLogPublisher(t, tr.URL, maps.Clone(wantEpoch))
	for _, ch := range []string{chA, chLog} {
		checkFence(t, c.c, c.gid, ch, wantEpoch[ch])
		c.publish(ch, 1, 100, 0, true) // the commit the fence expects
		c.publish(ch, 3, 100, 0, false)
		for _, e := range c.acked {
			if e.ch == ch && e.seq <= p.maxSeq(ch) {
				t.Fatalf("%s: seq %d after the replay, at or below the acknowledged %d", ch, e.seq, p.maxSeq(ch))
			}
		}
		checkFence(t, c.c, c.gid, ch, wantEpoch[ch]+1)
	}
	// The replay is durable, and the new run's entries with it.
	c.c.c.CloseNow()
	tr.stop(t)
	tr = startRelay(t, cfg)
	checkServed(t, tr.URL, append(slices.Clone(p.acked), c.acked...))
}

// TestLogReplayTornTail is TestLogReplayRebuildsIndex with the last
// record of the log damaged as a crash in the middle of its write leaves
// it: the relay opens, serves every entry before it, and goes on above
// every seq the log ever held, in a segment of its own; a second crash of
// the same kind then replays the torn segment up to the damage again and
// the new run's segment after it.
func TestLogReplayTornTail(t *testing.T) {
	for _, damage := range []string{"flipped", "cut", "zeroed"} {
		t.Run(damage, func(t *testing.T) { testLogReplayTornTail(t, damage) })
	}
}

func testLogReplayTornTail(t *testing.T, damage string) {
	path, cfg, tr, p := startLogFixture(t)
	p.publish(chA, 150, 5000, 40, false)
	p.c.c.CloseNow()
	tr.stop(t)

	recs := logRecords(t, path)
	last := recs[len(recs)-1]
	if last.rec.Channel != chA || last.rec.Seq != p.maxSeq(chA) {
		t.Fatalf("the log's last record is %s seq %d, want %s seq %d", last.rec.Channel, last.rec.Seq, chA, p.maxSeq(chA))
	}
	file := filepath.Join(logDir(path), seglog.Name(last.seg))
	switch damage {
	case "flipped":
		filedamage.FlipAt(t, file, last.at+int64(len(last.rec.Payload))/2)
	case "cut":
		filedamage.Truncate(t, file, last.at+10)
	case "zeroed":
		filedamage.WriteAt(t, file, make([]byte, seglog.HeaderSize), last.off)
	}
	maxHeld := map[string]uint64{}
	for _, r := range recs {
		maxHeld[r.rec.Channel] = max(maxHeld[r.rec.Channel], r.rec.Seq)
	}
	takeBackIndex(t, path, 30, map[string][2]any{chA: {int64(1), nil}, chLog: {int64(2), nil}})

	tr = startRelay(t, cfg)
	var before []logEntry // every entry before the damage
	for _, e := range p.acked {
		if e.ch != chA || e.seq != last.rec.Seq {
			before = append(before, e)
		}
	}
	checkServed(t, tr.URL, before)
	c := newLogPublisher(t, tr.URL, map[string]uint64{chA: p.epoch[chA], chLog: p.epoch[chLog]})
	checkFence(t, c.c, c.gid, chA, p.epoch[chA])
	c.publish(chA, 5, 100, 2, false)
	c.publish(chLog, 5, 100, 0, false)
	for _, e := range c.acked {
		if e.seq <= maxHeld[e.ch] {
			t.Fatalf("%s: seq %d after the torn tail, at or below seq %d the log held", e.ch, e.seq, maxHeld[e.ch])
		}
	}
	c.c.c.CloseNow()
	tr.stop(t)
	for _, r := range logRecords(t, path) {
		if r.seg == last.seg && r.off >= last.off {
			t.Fatalf("the new run wrote %s seq %d after the torn tail, in segment %d at %d", r.rec.Channel, r.rec.Seq, r.seg, r.off)
		}
	}

	// The same crash again: the whole log replays, up to the damage in
	// the torn segment and then the new run's segment.
	takeBackIndex(t, path, 20, nil)
	tr = startRelay(t, cfg)
	checkServed(t, tr.URL, append(before, c.acked...))
	c2 := newLogPublisher(t, tr.URL, nil)
	c2.publish(chA, 1, 100, 0, false)
	if seq := c2.acked[0].seq; seq <= c.maxSeq(chA) {
		t.Fatalf("seq %d after the second replay, at or below %d", seq, c.maxSeq(chA))
	}
}

// segFootprint is the number and total size of a log's segment files.
func segFootprint(t *testing.T, path string) (int, int64) {
	t.Helper()
	ents, err := os.ReadDir(logDir(path))
	if err != nil {
		t.Fatal(err)
	}
	n, size := 0, int64(0)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		fi, err := e.Info()
		if os.IsNotExist(err) {
			continue // removed while listed
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		size += fi.Size()
	}
	return n, size
}

// TestLogDiskBounded writes many times what a small cap keeps, on two
// channels, through small segments: the segments the cap emptied are
// collected (when the indexer moves to a new segment) and their files
// reused, so the log's files stay few, their total size does not grow
// with what was written, and the newest entries within the cap read back
// intact.
func TestLogDiskBounded(t *testing.T) {
	total := 32 << 20
	if testing.Short() {
		total = 12 << 20
	}
	testLogDiskBounded(t, 256<<10, total, true)
}

// TestLogDiskBoundedDefaultSegments is TestLogDiskBounded with the
// production segments, which double up to seglog.DefaultMaxSegment, and handshake
// entries among the application entries: a recycled file keeps its size
// and the next new one doubles from the last, so the files grow towards
// seglog.DefaultMaxSegment each; their number stays bounded.
func TestLogDiskBoundedDefaultSegments(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 256 MiB")
	}
	testLogDiskBounded(t, 0, 256<<20, false)
}

// testLogDiskBounded writes total bytes of 1 KiB entries to two channels
// with a cap of 16, in segments of up to seg bytes (0 for seglog.DefaultMaxSegment);
// plain leaves out the proposals and Welcomes, which a cap of their own
// keeps, so that they hold more segments.
func testLogDiskBounded(t *testing.T, seg int64, total int, plain bool) {
	const capN, size = 16, 1024
	path := filepath.Join(t.TempDir(), "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, ArchiveCap: capN, logSegment: seg})
	p := newLogPublisher(t, tr.URL, nil)
	p.plain = plain
	maxFiles, maxSize := 0, int64(0)
	const round = 512 << 10
	var firstHalf int64
	for written := 0; written < total; written += 2 * round {
		// A fresh token each round: under -race the run outlasts one.
		p.c.send(map[string]string{"type": "auth", "token": mint(t, "alice", "")})
		p.c.expect(map[string]any{"type": "ok", "message": "reauthenticated"})
		p.publish(chA, round/size, size, 0, false)
		p.publish(chLog, round/size, size, 0, false)
		settled(t, tr)
		n, s := segFootprint(t, path)
		maxFiles, maxSize = max(maxFiles, n), max(maxSize, s)
		if written < total/2 {
			firstHalf = maxSize
		}
	}
	n, s := segFootprint(t, path)
	t.Logf("%d MiB written in segments of up to %d KiB: the log peaked at %d files, %d KiB (%d KiB in the first half); %d files, %d KiB at the end",
		total>>20, cmp.Or(seg, seglog.DefaultMaxSegment)>>10, maxFiles, maxSize>>10, firstHalf>>10, n, s>>10)
	// The segment being written and the spare, the free files, the two
	// segments each channel's newest entries may span, and one the cap
	// emptied since the indexer last moved to a new segment.
	const bound = 2 + seglog.MaxFree + 2*2 + 1
	if maxFiles > bound || maxSize > bound*cmp.Or(seg, seglog.DefaultMaxSegment) {
		t.Fatalf("the log grew to %d files, %d KiB, for %d KiB the archive holds", maxFiles, maxSize>>10, 2*capN*size>>10)
	}
	// The newest cap entries of each channel, intact.
	var want []logEntry
	for _, ch := range []string{chA, chLog} {
		var mine []logEntry
		for _, e := range p.acked {
			if e.ch == ch && e.et == EntryApp {
				mine = append(mine, e)
			}
		}
		want = append(want, mine[len(mine)-capN:]...)
	}
	tok := mint(t, "reader", "")
	for _, ch := range []string{chA, chLog} {
		got := readApp(t, tr.URL, ch, tok)
		if len(got) != capN {
			t.Fatalf("%s serves %d entries, want the cap, %d", ch, len(got), capN)
		}
	}
	for _, e := range want {
		got := readApp(t, tr.URL, e.ch, tok)
		if !bytes.Equal(got[e.seq], e.payload) {
			t.Fatalf("%s seq %d reads back as %q, want %q", e.ch, e.seq, clip(got[e.seq]), clip(e.payload))
		}
	}
}

// TestLogCleanRestart stops and reopens a relay several times: after a
// clean stop the index holds the whole log, so an open replays nothing
// (the rows are unchanged and the usage saved at the stop is trusted),
// and reads serve the entries of every run, across their segments.
func TestLogCleanRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true}
	var acked []logEntry
	epochs := map[string]uint64{}
	for run := range 4 {
		tr := startRelay(t, cfg)
		checkServed(t, tr.URL, acked)
		p := newLogPublisher(t, tr.URL, epochs)
		if run != 2 { // a run that writes nothing
			p.publish(chA, 60, 4000*(run+1), 20, false)
			p.publish(chLog, 10, 500, 3, false)
		}
		acked = append(acked, p.acked...)
		p.c.c.CloseNow()
		tr.stop(t)

		// The applied position is the log's end.
		db := openIndex(t, path)
		seg := uint64(queryInt(t, db, `SELECT value FROM state WHERE key = 'log_seg'`))
		off := queryInt(t, db, `SELECT value FROM state WHERE key = 'log_off'`)
		if clean := queryInt(t, db, `SELECT value FROM state WHERE key = 'usage_clean'`); clean != 1 {
			t.Fatalf("run %d: usage_clean %d after a clean stop", run, clean)
		}
		segs := logSegments(t, path)
		if segs[len(segs)-1] != seg {
			t.Fatalf("run %d: applied up to segment %d, the log's newest is %d", run, seg, segs[len(segs)-1])
		}
		var end int64
		for _, r := range logRecords(t, path) {
			if r.seg == seg {
				end = r.end
			}
		}
		if off != end {
			t.Fatalf("run %d: applied up to %d of segment %d, its records end at %d", run, off, seg, end)
		}
		rows := queryInt(t, db, `SELECT count(*) FROM messages`)
		// A usage the open must load as saved, not recompute: one byte
		// more than the rows hold.
		execSQL(t, db, `UPDATE usage SET bytes = bytes + 1 WHERE sub = 'alice'`)
		saved := queryInt(t, db, `SELECT bytes FROM usage WHERE sub = 'alice'`)
		db.Close()

		tr = startRelay(t, cfg)
		settled(t, tr)
		if got := queryInt(t, tr.db, `SELECT count(*) FROM messages`); got != rows {
			t.Fatalf("run %d: %d rows after the reopen, %d before", run, got, rows)
		}
		if got := tr.arch.Used("alice"); got != saved {
			t.Fatalf("run %d: alice's usage %d after a clean reopen, saved %d: the open replayed or recomputed", run, got, saved)
		}
		checkServed(t, tr.URL, acked)
		tr.stop(t)
	}
	// The entries are in segments of several runs.
	db := openIndex(t, path)
	if n := queryInt(t, db, `SELECT count(DISTINCT seg) FROM messages`); n < 3 {
		t.Fatalf("the rows point into %d segments, want those of three runs", n)
	}
}

// TestLogReplayFenceReset: a fence reset is a record of its own in the
// log (no entry, the channel row only); a replay over it restores the
// fence it set, even one below the epoch the channel's commits had
// reached.
func TestLogReplayFenceReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true}
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chA, 30, 200, 3, false) // commits at epochs 0..9
	p.publish(chLog, 5, 200, 0, true)
	if err := tr.arch.ResetFence(chA, 4, 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.arch.ResetFence(chLog, 1000, 0); err != nil {
		t.Fatal(err)
	}
	p.epoch[chA] = 4
	p.publish(chA, 1, 200, 0, true) // accepted at 4; 5 next
	p.c.c.CloseNow()
	tr.stop(t)

	takeBackIndex(t, path, 10, map[string][2]any{chA: {int64(1), int64(0)}, chLog: {int64(1), int64(0)}})
	tr = startRelay(t, cfg)
	checkServed(t, tr.URL, p.acked)
	c := newLogPublisher(t, tr.URL, map[string]uint64{chA: 5, chLog: 1000})
	checkFence(t, c.c, c.gid, chA, 5)
	checkFence(t, c.c, c.gid, chLog, 1000)
	c.publish(chLog, 1, 10, 0, true)
	checkFence(t, c.c, c.gid, chLog, 1001)
}

// TestLogReplayKeepsCaps replays a log that holds many times the cap of
// application and handshake entries (the index taken back to the start
// of the log): the replay trims the handshake entries to the cap, reads
// serve exactly the newest cap of each kind, and once the channel is
// written again the usage counts only what is kept.
func TestLogReplayKeepsCaps(t *testing.T) {
	const capN = 8
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, ArchiveCap: capN}
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chA, 120, 300, 2, false)
	p.c.c.CloseNow()
	tr.stop(t)
	newest := func(acked []logEntry, app bool) []logEntry {
		var out []logEntry
		for _, e := range acked {
			if (e.et == EntryApp) == app {
				out = append(out, e)
			}
		}
		return out[max(0, len(out)-capN):]
	}
	want := append(newest(p.acked, true), newest(p.acked, false)...)

	takeBackIndex(t, path, 5, map[string][2]any{chA: {int64(3), nil}})
	tr = startRelay(t, cfg)
	checkServed(t, tr.URL, want)
	if n := queryInt(t, tr.db, `SELECT count(*) FROM messages WHERE entry_type != 0`); n != capN {
		t.Fatalf("%d handshake rows after the replay, cap %d", n, capN)
	}
	c := newLogPublisher(t, tr.URL, maps.Clone(p.epoch))
	c.publish(chA, 1, 300, 0, false)
	want = newest(append(slices.Clone(p.acked), c.acked...), true)
	want = append(want, newest(p.acked, false)...)
	checkServed(t, tr.URL, want)
	checkUsage(t, tr, "alice", "after a write")
	var kept int64
	for _, e := range want {
		kept += int64(len(e.payload))
	}
	if got := storedUsage(t, tr, "alice"); got != kept {
		t.Fatalf("the archive holds %d bytes of alice's, the entries kept are %d", got, kept)
	}
}

// gatedWriter is a response writer whose writes wait for gate: a client
// that stops reading in the middle of a page.
type gatedWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
	first  chan struct{} // closed at the first write
	once   sync.Once
	gate   chan struct{}
}

func (w *gatedWriter) Header() http.Header  { return w.header }
func (w *gatedWriter) WriteHeader(code int) { w.code = code }
func (w *gatedWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.first) })
	<-w.gate
	return w.body.Write(b)
}

// TestLogPinnedPage: a page that began before the cap emptied the
// segments it reads from keeps them: they are dropped while it stalls
// (a client that stops reading), and removed or reused only once it is
// done, so it serves every entry it began with, intact.
func TestLogPinnedPage(t *testing.T) {
	const capN, size = 16, 256 << 10
	path := filepath.Join(t.TempDir(), "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, ArchiveCap: capN, MaxPageBytes: 16 << 20})
	a := tr.arch.(*sqlitearchive.Archive)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chA, capN, size, 0, false)
	first := slices.Clone(p.acked)

	req := httptest.NewRequest("GET", "/v1/sync?channel="+chA+"&limit=500", nil)
	req.Header.Set("Authorization", "Bearer "+mint(t, "reader", ""))
	w := &gatedWriter{header: http.Header{}, first: make(chan struct{}), gate: make(chan struct{})}
	served := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				served <- fmt.Errorf("the page was aborted: %v", r)
			}
		}()
		tr.ServeHTTP(w, req)
		served <- nil
	}()
	select {
	case <-w.first:
	case err := <-served:
		t.Fatalf("the page ended before its first write: %v", err)
	}
	// The page stalls at its first 64 KiB. The cap pushes out every
	// entry it is reading, and the first segment they were in is dropped.
	oldest := uint64(queryInt(t, tr.db, `SELECT min(seg) FROM messages WHERE channel = ?`, chA))
	dropped := func() (doomed, listed bool) { return a.Log().Dropping(oldest) }
	for round := 0; ; round++ {
		if doomed, listed := dropped(); doomed || !listed {
			break
		}
		if round == 20 {
			close(w.gate)
			<-served
			t.Fatalf("segment %d was not dropped after %d MiB more", oldest, round*capN*size>>20)
		}
		p.publish(chA, capN, size, 0, false)
		settled(t, tr)
	}
	p.publish(chA, 2*capN, size, 0, false) // and reuse what would be free
	settled(t, tr)
	if doomed, _ := dropped(); !doomed {
		t.Errorf("segment %d went while a page that began before was reading it", oldest)
	}
	close(w.gate)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if w.code != 200 {
		t.Fatalf("status %d", w.code)
	}
	var page struct {
		Entries []struct {
			Seq     uint64 `json:"seq"`
			Payload []byte `json:"payload"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(w.body.Bytes(), &page); err != nil {
		t.Fatalf("the page is not JSON: %v", err)
	}
	if len(page.Entries) != len(first) {
		t.Fatalf("the page has %d entries, want the %d there when it began", len(page.Entries), len(first))
	}
	for i, e := range page.Entries {
		if e.Seq != first[i].seq || !bytes.Equal(e.Payload, first[i].payload) {
			t.Fatalf("entry %d: seq %d %q, want seq %d %q", i, e.Seq, clip(e.Payload), first[i].seq, clip(first[i].payload))
		}
	}
	// Done reading: the dropped segment goes.
	if doomed, listed := dropped(); doomed || listed {
		t.Fatalf("segment %d kept after the page (dropped %v, listed %v)", oldest, doomed, listed)
	}
}

// TestLogLongSubject: an account name longer than a log record's name
// field (0xffff bytes) is archived like any other, since no record names
// its sender, and does not stop the archive for everyone else.
func TestLogLongSubject(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, PreAuthReadLimit: 256 << 10})
	long := dialWS(t, tr.URL, "/ws/"+chA)
	long.auth(mint(t, strings.Repeat("s", 0x10000), ""))
	long.publish(chA, []byte("from a very long account name"))
	if m := long.recv(); m["type"] != "ok" {
		t.Fatalf("a publish from an account name of %d bytes: %v", 0x10000, m)
	}
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publish(chA, []byte("from alice"))
	if m := c.recv(); m["type"] != "ok" {
		t.Fatalf("after a publish from an account name of %d bytes, alice's publish is refused: %v", 0x10000, m)
	}
}

// TestLogReplayLargestHandshake replays a handshake of MaxHandshakePayload,
// a record larger than the log's first segment and than the scan's
// buffer, after the index lost it; and, torn in its middle, stops the
// replay there, with the entries before it served.
func TestLogReplayLargestHandshake(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 16 MiB handshakes")
	}
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "relay.db")
			cfg := Config{DBPath: path, NoSync: true}
			tr := startRelay(t, cfg)
			p := newLogPublisher(t, tr.URL, nil)
			p.publish(chA, 20, 1000, 0, false)
			big := append(publicMessage(p.gid, 0, 3), bytes.Repeat([]byte("large commit "), MaxHandshakePayload/13)...)
			big = big[:MaxHandshakePayload]
			p.c.publish(chA, big)
			seq := p.c.expect(map[string]any{"type": "ok", "message": "published"})["seq"].(float64)
			p.epoch[chA] = 1
			want := append(slices.Clone(p.acked), logEntry{ch: chA, seq: uint64(seq), payload: big, et: EntryCommit})
			if !torn {
				p.publish(chA, 5, 1000, 0, false)
				want = append(want, p.acked[20:]...)
			}
			p.c.c.CloseNow()
			tr.stop(t)
			recs := logRecords(t, path)
			last := recs[len(recs)-1]
			if torn {
				if last.rec.Seq != uint64(seq) {
					t.Fatalf("the last record is seq %d, not the handshake's %d", last.rec.Seq, uint64(seq))
				}
				filedamage.Truncate(t, filepath.Join(logDir(path), seglog.Name(last.seg)), last.at+MaxHandshakePayload/2)
				want = want[:len(want)-1]
			}
			takeBackIndex(t, path, 10, nil)
			tr = startRelay(t, cfg)
			checkServed(t, tr.URL, want)
			if torn {
				c := newLogPublisher(t, tr.URL, nil)
				// The torn commit never set the fence: a commit at its
				// epoch is taken.
				c.publish(chA, 1, 10, 0, true)
				if c.acked[0].seq <= uint64(seq) {
					t.Fatalf("seq %d after the torn handshake %d", c.acked[0].seq, uint64(seq))
				}
			}
		})
	}
}

// TestLogReplayMoves: the compactor's moves are records of the log like
// publishes; a crash that took back their index update (and so the
// removal of the segment they emptied) is repaired by the replay, which
// points each row at its entry's new place. A move torn in its write
// leaves its row where it was, and the entry is served from there.
func TestLogReplayMoves(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) { testLogReplayMoves(t, torn) })
	}
}

func testLogReplayMoves(t *testing.T, torn bool) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, logSegment: 64 << 10}
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.plain = true
	for range 40 { // one at a time: the first segment holds 30
		p.publish(chA, 1, 2000, 0, false)
	}
	p.publish(chLog, 5, 2000, 0, true)
	settled(t, tr)
	a := tr.arch.(*sqlitearchive.Archive)
	src := uint64(queryInt(t, tr.db, `SELECT min(seg) FROM messages`))
	saved, err := os.ReadFile(filepath.Join(logDir(path), seglog.Name(src)))
	if err != nil {
		t.Fatal(err)
	}
	before := rowPlaces(t, tr.db, `seg = ?`, int64(src))
	if len(before) < 2 {
		t.Fatalf("%d entries to move", len(before))
	}
	if err := a.MoveSegment(src); err != nil {
		t.Fatal(err)
	}
	settled(t, tr)
	if left := rowPlaces(t, tr.db, `seg = ?`, int64(src)); len(left) != 0 {
		t.Fatalf("%d rows still in segment %d after the move", len(left), src)
	}
	if !torn {
		p.publish(chA, 5, 100, 0, false) // after the moves, lost with them
	}
	p.c.c.CloseNow()
	tr.stop(t)

	// The moves in the log, in order.
	var moves []diskRecord
	for _, r := range logRecords(t, path) {
		if r.rec.Flags&seglog.FlagMoved != 0 {
			moves = append(moves, r)
		}
	}
	if len(moves) != len(before) {
		t.Fatalf("%d moved records in the log for %d rows", len(moves), len(before))
	}
	want := map[rowKey]seglog.Pos{}
	for _, m := range moves {
		want[rowKey{m.rec.Channel, m.rec.Seq}] = seglog.Pos{Seg: m.seg, Off: m.at}
	}
	last := rowKey{moves[len(moves)-1].rec.Channel, moves[len(moves)-1].rec.Seq}
	if torn {
		m := moves[len(moves)-1]
		filedamage.FlipAt(t, filepath.Join(logDir(path), seglog.Name(m.seg)), m.at)
		want[last] = before[last]
	}

	// The crash: the moved segment is still there, the rows point into it,
	// and the index holds the log up to the first move. One moved entry
	// was deleted meanwhile (the TTL sweep commits without moving the
	// applied position): its move must not bring it back.
	if err := os.WriteFile(filepath.Join(logDir(path), seglog.Name(src)), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	db := openIndex(t, path)
	for k, pl := range before {
		execSQL(t, db, `UPDATE messages SET seg = ?, at = ? WHERE channel = ? AND seq = ?`, int64(pl.Seg), pl.Off, k.ch, int64(k.seq))
	}
	gone := moves[0].rec
	execSQL(t, db, `DELETE FROM messages WHERE channel = ? AND seq = ?`, gone.Channel, int64(gone.Seq))
	delete(want, rowKey{gone.Channel, gone.Seq})
	if !torn {
		execSQL(t, db, `DELETE FROM messages WHERE id IN (SELECT id FROM messages ORDER BY id DESC LIMIT 5)`)
	}
	execSQL(t, db, `UPDATE state SET value = ? WHERE key = 'log_seg'`, int64(moves[0].seg))
	execSQL(t, db, `UPDATE state SET value = ? WHERE key = 'log_off'`, moves[0].off)
	db.Close()

	tr = startRelay(t, cfg)
	settled(t, tr)
	got := rowPlaces(t, tr.db, `1`)
	for k, pl := range want {
		if got[k] != pl {
			t.Fatalf("%s seq %d: the row points at %v after the replay, want %v", k.ch, k.seq, got[k], pl)
		}
	}
	if _, ok := got[rowKey{gone.Channel, gone.Seq}]; ok {
		t.Fatalf("%s seq %d, deleted after its move, is back after the replay", gone.Channel, gone.Seq)
	}
	var served []logEntry
	for _, e := range p.acked {
		if e.ch != gone.Channel || e.seq != gone.Seq {
			served = append(served, e)
		}
	}
	checkServed(t, tr.URL, served)
}

type rowKey struct {
	ch  string
	seq uint64
}

// rowPlaces returns where the rows a condition selects point in the log.
func rowPlaces(t *testing.T, db *sql.DB, where string, args ...any) map[rowKey]seglog.Pos {
	t.Helper()
	rows, err := db.Query(`SELECT channel, seq, seg, at FROM messages WHERE `+where, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[rowKey]seglog.Pos{}
	for rows.Next() {
		var k rowKey
		var seg, at int64
		if err := rows.Scan(&k.ch, &k.seq, &seg, &at); err != nil {
			t.Fatal(err)
		}
		out[k] = seglog.Pos{Seg: uint64(seg), Off: at}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// logDir is the log directory of the archive at path.
func logDir(path string) string { return path + "-log" }

// TestLogMissingSegments: an index whose log is gone (restored from a
// copy of the database file alone, or a segment file lost) is refused at
// the open, with an error that says so, and the open changes nothing; a
// segment no row points into may go (an empty run's) without it.
func TestLogMissingSegments(t *testing.T) {
	for _, lost := range []string{"directory", "newest segment", "oldest segment", "unused segment"} {
		t.Run(lost, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "relay.db")
			cfg := Config{DBPath: path, NoSync: true, logSegment: 64 << 10}
			tr := startRelay(t, cfg)
			p := newLogPublisher(t, tr.URL, nil)
			p.plain = true
			p.publish(chA, 100, 2000, 0, false)
			p.c.c.CloseNow()
			tr.stop(t)
			if lost == "unused segment" {
				startRelay(t, cfg).stop(t) // a run that writes nothing
			}
			segs := logSegments(t, path)
			if len(segs) < 3 {
				t.Fatalf("segments %v", segs)
			}
			switch lost {
			case "directory":
				if err := os.RemoveAll(logDir(path)); err != nil {
					t.Fatal(err)
				}
			case "oldest segment":
				os.Remove(filepath.Join(logDir(path), seglog.Name(segs[0])))
			default:
				os.Remove(filepath.Join(logDir(path), seglog.Name(segs[len(segs)-1])))
			}
			state := func() string {
				db := openIndex(t, path)
				defer db.Close()
				return fmt.Sprint(queryInt(t, db, `SELECT value FROM state WHERE key = 'log_seg'`),
					queryInt(t, db, `SELECT value FROM state WHERE key = 'log_off'`),
					queryInt(t, db, `SELECT count(*) FROM messages`))
			}
			before := state()
			var left []uint64
			if lost != "directory" {
				left = logSegments(t, path)
			}
			s, err := New(context.Background(), Config{DBPath: path, NoSync: true, JWTSecret: testSecret, OpenChannels: true, logSegment: 64 << 10})
			if lost != "unused segment" {
				if err == nil {
					s.Close(t.Context())
					t.Fatalf("%s lost: the archive opened", lost)
				}
				if !strings.Contains(err.Error(), "segment") {
					t.Fatalf("%s lost: the refusal does not say what is missing: %v", lost, err)
				}
				if after := state(); after != before {
					t.Fatalf("the refused open changed the index: %s, was %s", after, before)
				}
				var now []uint64
				if _, err := os.Stat(logDir(path)); err == nil {
					now = logSegments(t, path)
				}
				if !slices.Equal(now, left) {
					t.Fatalf("the refused open changed the log: %v, was %v", now, left)
				}
				return
			}
			if err != nil {
				t.Fatalf("an unused segment lost: %v", err)
			}
			hs := httptest.NewServer(s)
			tr = &testRelay{Server: s, URL: hs.URL, hs: hs}
			t.Cleanup(func() { tr.stop(t) })
			checkServed(t, tr.URL, p.acked)
		})
	}
}

// TestLogReplayFromSnapshot is the crash the log is there for, with the
// index exactly as a machine crash can leave it: a consistent copy of the
// index taken while the relay ran (VACUUM INTO), put back after more
// publishes, a fence reset and evictions by the cap were acknowledged
// and the relay stopped. The fsync'd log replays them all: every
// acknowledged entry within the cap is served, the fence is where the
// last change left it, and seqs go on above.
func TestLogReplayFromSnapshot(t *testing.T) {
	const capN = 8
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	cfg := Config{DBPath: path, ArchiveCap: capN} // the log and the index sync as in production
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chA, 30, 500, 4, false)
	p.publish(chLog, 10, 500, 3, false)
	settled(t, tr)
	snap := filepath.Join(dir, "snap.db")
	if _, err := tr.db.Exec(`VACUUM INTO ?`, snap); err != nil {
		t.Fatal(err)
	}
	p.publish(chA, 30, 500, 4, true)
	p.publish(chLog, 10, 500, 0, false)
	if err := tr.arch.ResetFence(chLog, 77, 0); err != nil {
		t.Fatal(err)
	}
	p.epoch[chLog] = 77
	p.c.c.CloseNow()
	tr.stop(t)

	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.Rename(snap, path); err != nil {
		t.Fatal(err)
	}
	tr = startRelay(t, cfg)
	var want []logEntry
	for _, ch := range []string{chA, chLog} {
		var app, hs []logEntry
		for _, e := range p.acked {
			switch {
			case e.ch != ch:
			case e.et == EntryApp:
				app = append(app, e)
			default:
				hs = append(hs, e)
			}
		}
		want = append(want, app[max(0, len(app)-capN):]...)
		want = append(want, hs[max(0, len(hs)-capN):]...)
	}
	checkServed(t, tr.URL, want)
	c := newLogPublisher(t, tr.URL, maps.Clone(p.epoch))
	for _, ch := range []string{chA, chLog} {
		checkFence(t, c.c, c.gid, ch, p.epoch[ch])
		c.publish(ch, 2, 100, 0, true)
	}
	for _, e := range c.acked {
		if e.seq <= p.maxSeq(e.ch) {
			t.Fatalf("%s: seq %d after the replay, at or below the acknowledged %d", e.ch, e.seq, p.maxSeq(e.ch))
		}
	}
	checkUsage(t, tr, "alice", "after the replay and new publishes")
}

// TestLogAckIsLogged: when a publish is acknowledged its record is in
// the log already, whatever the index has done, and a read that starts
// after the acknowledgement serves it.
func TestLogAckIsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true})
	p := newLogPublisher(t, tr.URL, nil)
	tok := mint(t, "reader", "")
	l, _, err := seglog.Open(logDir(path), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 40 {
		ch := []string{chA, chLog}[i%2]
		p.publish(ch, 1, 50+300*i, 5, false)
		e := p.acked[len(p.acked)-1]
		found := false
		for _, seg := range listed(t, path) {
			l.Scan(seg, 0, func(r *seglog.Record, _ int64) error {
				found = found || r.Channel == ch && r.Seq == e.seq && bytes.Equal(r.Payload, e.payload)
				return nil
			})
		}
		if !found {
			t.Fatalf("%s seq %d is acknowledged but not in the log", ch, e.seq)
		}
		code, m := httpGet(t, fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d", tr.URL, ch, e.seq-1), tok)
		entries, _ := m["entries"].([]any)
		if code != 200 || len(entries) == 0 || uint64(entries[0].(map[string]any)["seq"].(float64)) != e.seq {
			t.Fatalf("%s seq %d is acknowledged, a read right after serves %d %v", ch, e.seq, code, m)
		}
	}
}

// listed is the segments of a running relay's log.
func listed(t *testing.T, path string) []uint64 {
	t.Helper()
	segs := logSegments(t, path)
	if len(segs) == 0 {
		t.Fatal("the log holds no segment")
	}
	return segs
}
