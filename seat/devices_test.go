package seat_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// approveFrom runs the new device's side in a goroutine and approves its
// user code from approver; it returns what each side got.
func approveFrom(t *testing.T, approver, device *seat.Seat) (seat.DeviceApproval, seat.DeviceResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := device.RequestDevice(ctx, "second home")
	if err != nil {
		t.Fatal(err)
	}
	g.PollInterval = 20 * time.Millisecond
	type result struct {
		r   seat.DeviceResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := device.WaitDevice(ctx, g)
		done <- result{r, err}
	}()
	time.Sleep(50 * time.Millisecond) // time passes: the device polls (every 20 ms) while pending at least once
	// The approver sees the device before approving; a fingerprint that is
	// not the device's approves nothing.
	p, err := approver.PendingDevice(ctx, g.UserCode)
	if err != nil || p.Fingerprint != g.Fingerprint || p.Label != "second home" {
		t.Fatalf("pending device %+v, %v; the device shows %q", p, err, g.Fingerprint)
	}
	for _, wrong := range []string{"", "0000 0000 0000", g.Fingerprint[:9]} {
		if _, err := approver.ApproveDevice(ctx, g.UserCode, wrong); !errors.Is(err, seat.ErrFingerprintMismatch) {
			t.Fatalf("approve with fingerprint %q: %v", wrong, err)
		}
	}
	a, err := approver.ApproveDevice(ctx, strings.ToLower(g.UserCode), strings.ToUpper(strings.ReplaceAll(g.Fingerprint, " ", "")))
	if err != nil {
		t.Fatal(err)
	}
	if a.Label != "second home" || a.Fingerprint != g.Fingerprint {
		t.Fatalf("approver saw %+v, device fingerprint %q", a, g.Fingerprint)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	return a, res.r
}

// TestDeviceGrantSecondHome restores a second home from the phrase and
// signs it in through a device grant: with the transport credential the
// approving seat sealed for it, it pulls the whole log and pushes without
// ever connecting.
func TestDeviceGrantSecondHome(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db")},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db")},
	})
	a := openSeat(t, st, t.TempDir())
	if _, err := a.Init(ctx); err != nil {
		t.Fatal(err)
	}
	acct, err := a.SignIn(ctx, "me@acme.test", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	log := []string{"water the plants", "call the bank", "book the train"}
	for _, s := range log {
		if _, err := a.Add(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Push(ctx); err != nil {
		t.Fatal(err)
	}
	words, _ := a.Phrase()

	bHome := t.TempDir()
	b := openSeat(t, st, bHome)
	if _, err := b.RequestDevice(ctx, "x"); !errors.Is(err, seat.ErrNoSeed) {
		t.Fatalf("grant before the phrase: %v", err)
	}
	did, err := b.Recover(ctx, strings.Join(words, " "))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.Recover(ctx, strings.ToUpper(strings.Join(words, "  "))); err != nil || again != did {
		t.Fatalf("recovering again with the same phrase: %q, %v", again, err)
	}
	approval, res := approveFrom(t, a, b)
	if !approval.SharedSeat || !res.Connected || res.AccountID != acct.AccountID || res.Org != "acme" {
		t.Fatalf("approval %+v, result %+v", approval, res)
	}
	chA, _ := a.SyncChannel(ctx)
	chB, _ := b.SyncChannel(ctx)
	if chA != chB {
		t.Fatalf("sync channels differ: %s, %s", chA, chB)
	}
	if n, err := b.Pull(ctx, nil); err != nil || n != 3 {
		t.Fatalf("pull on the second home: %d, %v", n, err)
	}
	if got := texts(t, b); !slices.Equal(got, log) {
		t.Fatalf("second home log %q", got)
	}
	if _, err := b.Add(ctx, "sent from the second home"); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Push(ctx); err != nil || n != 1 {
		t.Fatalf("push from the second home: %d, %v", n, err)
	}
	if n, err := a.Pull(ctx, nil); err != nil || n != 1 {
		t.Fatalf("pull back on the first home: %d, %v", n, err)
	}
	if got := texts(t, a); !slices.Contains(got, "sent from the second home") {
		t.Fatalf("first home log %q", got)
	}
	// The second home holds the credential that travelled, so it is
	// connected: its own registration of the identity (which is taken)
	// is never needed, which is exactly why the credential had to travel.
	if _, err := b.Connect(ctx); err != nil {
		t.Fatalf("the second home, connected by the approval: %v", err)
	}
	// The user code is spent.
	if _, err := a.ApproveDevice(ctx, approval.GrantID[:8], approval.Fingerprint); err == nil {
		t.Fatal("approved a bogus code")
	}

	// Neither plane holds the phrase, the log, or any credential in the
	// clear: not the account keys, not the transport credential that
	// travelled to the second home.
	secrets := append(log, "sent from the second home", strings.Join(words, " "), acct.APIKey)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(bHome, "seat.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"api_key", "seat_credential"} {
		var sealed []byte
		if err := db.QueryRow(`SELECT value FROM meta WHERE key = ?`, k).Scan(&sealed); err != nil {
			t.Fatalf("second home's %s: %v", k, err)
		}
		v, err := seat.UnsealStored(b, "credential", k, sealed)
		if err != nil || len(v) < 20 {
			t.Fatalf("second home's %s: %q, %v", k, v, err)
		}
		secrets = append(secrets, string(v))
	}
	scanForSecrets(t, filepath.Join(dir, "relay.db"), secrets)
	scanForSecrets(t, filepath.Join(dir, "directory.db"), secrets)
}

// TestDeviceGrantOtherSeed approves a device restored from another phrase:
// it gets the account, but not the approver's transport credential, which
// is for another sync channel.
func TestDeviceGrantOtherSeed(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	a := openSeat(t, st, t.TempDir())
	a.Init(ctx)
	if _, err := a.SignIn(ctx, "me@acme.test", "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	b := openSeat(t, st, t.TempDir())
	b.Init(ctx)
	approval, res := approveFrom(t, a, b)
	if !approval.SharedSeat || res.Connected || res.Org != "acme" {
		t.Fatalf("approval %+v, result %+v", approval, res)
	}
	// Signed in to the same account, it connects its own identity.
	if _, err := b.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recover(ctx, strings.Repeat("abandon ", 23)+"art"); !errors.Is(err, seat.ErrSeedExists) {
		t.Fatalf("recovering another phrase over a seed: %v", err)
	}
}

// TestDeviceGrantUnconnectedApprover: an approver that never ran connect
// registered its seat when it signed in (so that its join offers are
// bound to its identity), and shares the seat credential; the new device
// is connected.
func TestDeviceGrantUnconnectedApprover(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	a := openSeat(t, st, t.TempDir())
	a.Init(ctx)
	if _, err := a.SignIn(ctx, "me@acme.test", "acme"); err != nil {
		t.Fatal(err)
	}
	words, _ := a.Phrase()
	b := openSeat(t, st, t.TempDir())
	if _, err := b.Recover(ctx, strings.Join(words, " ")); err != nil {
		t.Fatal(err)
	}
	approval, res := approveFrom(t, a, b)
	if !approval.SharedSeat || !res.Connected || res.Org != "acme" {
		t.Fatalf("approval %+v, result %+v", approval, res)
	}
	if _, err := b.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestDevice(ctx, ""); err == nil {
		t.Fatal("a signed-in seat asked for a device grant")
	}
}

// TestDeviceGrantWaitInterrupted: cancelling the wait returns at once.
func TestDeviceGrantWaitInterrupted(t *testing.T) {
	st := skytaletest.NewStack(t)
	b := openSeat(t, st, t.TempDir())
	b.Init(context.Background())
	g, err := b.RequestDevice(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := b.WaitDevice(ctx, g); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("wait took %v to notice the cancel", d)
	}
}

// TestDeviceGrantPollRetries: a directory that fails for a while (here the
// first polls answer 503) does not end the wait.
func TestDeviceGrantPollRetries(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	target, _ := url.Parse(st.APIURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var failed atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/device/grants/") && failed.Add(1) <= 3 {
			http.Error(w, `{"error":"unavailable","message":"try later"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer flaky.Close()

	a := openSeat(t, st, t.TempDir())
	a.Init(ctx)
	if _, err := a.SignIn(ctx, "me@acme.test", "acme"); err != nil {
		t.Fatal(err)
	}
	b, err := seat.Open(ctx, seat.Config{Home: t.TempDir(), APIURL: flaky.URL, RelayURL: st.RelayURL})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	b.Init(ctx)
	if _, res := approveFrom(t, a, b); res.Org != "acme" {
		t.Fatalf("result %+v", res)
	}
	if failed.Load() < 4 {
		t.Fatalf("only %d polls", failed.Load())
	}
}
