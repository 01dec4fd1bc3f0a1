package seat_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

func openSeat(t *testing.T, st *skytaletest.Stack, home string) *seat.Seat {
	t.Helper()
	return openSeatAt(t, st, st.APIURL, home)
}

// openSeatAt is openSeat with the seat speaking to the directory at
// apiURL (a proxy in front of st's, say).
func openSeatAt(t *testing.T, st *skytaletest.Stack, apiURL, home string) *seat.Seat {
	t.Helper()
	s, err := seat.Open(context.Background(), seat.Config{Home: home, APIURL: apiURL, RelayURL: st.RelayURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func texts(t *testing.T, s *seat.Seat) []string {
	t.Helper()
	es, err := s.Log(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Text)
	}
	return out
}

// TestTwoHomesSync pushes from one home and restores the log on a second
// home made from the same phrase, then the other way round.
func TestTwoHomesSync(t *testing.T) {
	ctx := context.Background()
	dbs := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dbs, "relay.db")},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dbs, "directory.db")},
	})
	a := openSeat(t, st, t.TempDir())
	did, err := a.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(did, "did:key:z") {
		t.Fatalf("identity %q", did)
	}
	acct, err := a.SignIn(ctx, "me@acme.test", "acme")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := a.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ch, "acme/tally/") {
		t.Fatalf("sync channel %q", ch)
	}
	var want []string
	for i := 0; i < 1200; i++ {
		text := fmt.Sprintf("entry %d: the quick brown fox", i)
		if _, err := a.Add(ctx, text); err != nil {
			t.Fatal(err)
		}
		want = append(want, text)
	}
	if n, err := a.Push(ctx); err != nil || n != 1200 {
		t.Fatalf("push = %d, %v", n, err)
	}
	if n, err := a.Push(ctx); err != nil || n != 0 {
		t.Fatalf("second push = %d, %v", n, err)
	}

	words, err := a.Phrase()
	if err != nil || len(words) != 24 {
		t.Fatalf("phrase: %d words, %v", len(words), err)
	}
	bHome := t.TempDir()
	b := openSeat(t, st, bHome)
	if did2, err := b.Restore(ctx, strings.Join(words, " ")); err != nil || did2 != did {
		t.Fatalf("restore: %q %v", did2, err)
	}
	// A second connect of the same identity is refused by the seat guard;
	// the second home uses the account key.
	if err := b.UseAccount(ctx, acct.AccountID, acct.Org, acct.APIKey); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(ctx); !errors.Is(err, seat.ErrSeatExists) {
		t.Fatalf("second connect of the same identity: %v, want ErrSeatExists", err)
	}
	n, err := b.Pull(ctx, nil)
	if err != nil || n != 1200 {
		t.Fatalf("pull = %d, %v", n, err)
	}
	if got := texts(t, b); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("restored log differs: %d entries", len(got))
	}
	if n, err := b.Pull(ctx, nil); err != nil || n != 0 {
		t.Fatalf("second pull = %d, %v", n, err)
	}

	if _, err := b.Add(ctx, "from the second home"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Push(ctx); err != nil {
		t.Fatal(err)
	}
	// a pulls its own batches back too: merging them again adds nothing.
	if n, err := a.Pull(ctx, nil); err != nil || n != 1 {
		t.Fatalf("pull on a = %d, %v", n, err)
	}
	if got := texts(t, a); got[len(got)-1] != "from the second home" || len(got) != 1201 {
		t.Fatalf("a's log ends with %q (%d entries)", got[len(got)-1], len(got))
	}

	// The phrase file is private.
	fi, err := os.Stat(filepath.Join(bHome, "phrase"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("phrase file: %v %v", fi.Mode(), err)
	}

	// Neither plane holds any entry, the phrase or the account key.
	secrets := append(want, "from the second home", strings.Join(words, " "), acct.APIKey)
	scanForSecrets(t, filepath.Join(dbs, "relay.db"), secrets)
	scanForSecrets(t, filepath.Join(dbs, "directory.db"), secrets)
}

func TestSeatErrors(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	s := openSeat(t, st, t.TempDir())
	if _, err := s.Add(ctx, "x"); !errors.Is(err, seat.ErrNoSeed) {
		t.Fatalf("add before init: %v", err)
	}
	if _, err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Init(ctx); !errors.Is(err, seat.ErrSeedExists) {
		t.Fatalf("second init: %v", err)
	}
	if _, err := s.Connect(ctx); !errors.Is(err, seat.ErrNotSignedIn) {
		t.Fatalf("connect before signin: %v", err)
	}
	if _, err := s.Restore(ctx, "abandon abandon"); err == nil {
		t.Fatal("restore of a short phrase succeeded")
	}
	for _, u := range []string{"http://example.com", "ftp://127.0.0.1", "not a url"} {
		if err := seat.CheckURL(u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:3100", "http://localhost:1", "http://[::1]:2", "https://relay.example.com"} {
		if err := seat.CheckURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
