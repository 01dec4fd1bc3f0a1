package seat_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCoverCannotEatTheLog: five members watch a room, each sending cover
// at the default rate, for a simulated day (three hours with -short,
// against a cap scaled by the same factor), while a sixth member is
// offline throughout; it then catches up on every real message of that
// time. The clock is sped up: the cover's mean interval shrinks by the
// same factor as the day, so the number of frames is the real one.
func TestCoverCannotEatTheLog(t *testing.T) {
	day, speedup := 24*time.Hour, 3000.0
	if testing.Short() {
		day, speedup = 3*time.Hour, 2000.0
	}
	capacity := int(int64(relay.DefaultArchiveCap) * int64(day) / int64(24*time.Hour))
	ctx := context.Background()
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: skytale.RelayConfig{ArchiveCap: capacity}})
	mean := time.Duration(float64(cover.DefaultMeanInterval) / speedup)
	run := time.Duration(float64(day) / speedup)

	alice := newWatcher(t, st, "acme", cover.Config{MeanInterval: mean})
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	watchers := []*member{alice}
	for i := 1; i < 5; i++ {
		w := newWatcher(t, st, fmt.Sprintf("org%d", i), cover.Config{MeanInterval: mean})
		join(t, alice, w, room)
		watchers = append(watchers, w)
	}
	offline := newMember(t, st, "offline")
	join(t, alice, offline, room)
	if _, err := offline.Room(room).Sync(ctx); err != nil {
		t.Fatal(err)
	}

	for _, w := range watchers {
		startWatch(t, w.Seat, room).connected(t)
	}
	// Real messages through the day: one every quarter hour from someone.
	var sent []string
	start := time.Now()
	for i := 0; time.Since(start) < run; i++ {
		text := fmt.Sprintf("real message %d", i)
		sendTo(t, watchers[i%len(watchers)], room, text)
		sent = append(sent, text)
		time.Sleep(time.Duration(float64(15*time.Minute) / speedup)) // time passes: a quarter hour of the sped-up day
	}

	msgs, err := offline.Room(room).Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		if m.Kind == "" {
			got = append(got, m.Text)
		}
	}
	if len(got) != len(sent) {
		t.Fatalf("the offline member caught up on %d of %d real messages (cap %d)", len(got), len(sent), capacity)
	}
	for i := range sent {
		if got[i] != sent[i] {
			t.Fatalf("message %d: %q, want %q", i, got[i], sent[i])
		}
	}
	// What the day cost the relay: every frame of the room's log.
	var frames, bytes int
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: offline.acct.APIKey}
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(ctx context.Context) (string, error) {
		tok, _, err := dc.Token(ctx)
		return tok, err
	}}
	if _, err := rc.SyncAll(ctx, room, 0, func(e seat.RelayEntry) error {
		frames++
		bytes += len(e.Payload)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a simulated %v: %d real messages, %d entries in the log (cap %d), %d payload bytes", day, len(sent), frames, capacity, bytes)
}
