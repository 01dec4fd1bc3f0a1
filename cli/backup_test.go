package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/skytale-oss/skytale/seat"
)

// TestServeBackupWhileWriting: `tally serve backup` copies a serve that
// is being written to on both planes; the copy passes SQLite's check,
// holds the secrets, and a serve started on it serves the accounts, seats
// and channels of before the backup.
func TestServeBackupWhileWriting(t *testing.T) {
	data := t.TempDir()
	p := serveInProcess(t, serveOptions{Data: data})
	home := t.TempDir()
	g := []string{"--home", home, "--api-url", p.apiURL, "--relay-url", p.relURL}
	mustTally(t, append(g, "init")...)
	mustTally(t, append(g, "signin", "--org", "acme")...)
	mustTally(t, append(g, "connect")...)

	// Writers on both planes: new accounts at the directory, pushes of
	// the seat's log to the relay.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var accounts, pushes atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			body := strings.NewReader(`{"email":"w@example.com","org":"w` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + `"}`)
			resp, err := http.Post(p.apiURL+"/v1/accounts", "application/json", body)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 201 {
					accounts.Add(1)
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		s, err := seat.Open(ctx, seat.Config{Home: home, APIURL: p.apiURL, RelayURL: p.relURL})
		if err != nil {
			return
		}
		defer s.Close(context.Background())
		for ctx.Err() == nil {
			if _, err := s.Add(ctx, "entry"); err != nil {
				return
			}
			if n, err := s.Push(ctx); err == nil {
				pushes.Add(int64(n))
			}
		}
	}()
	eventually(t, "writes on both planes", func() bool { return accounts.Load() >= 3 && pushes.Load() >= 3 })

	target := filepath.Join(t.TempDir(), "backup")
	out, err := tally(t, "", "serve", "backup", "--data", data, target)
	stop()
	wg.Wait()
	if err != nil || !strings.HasPrefix(out, "backed up "+data+" to "+target+" (directory.db, relay.db, relay.db-log, jwt_secret, internal_secret)") {
		t.Fatalf("backup: %q %v", out, err)
	}
	for _, f := range []string{"directory.db", "relay.db", "jwt_secret", "internal_secret"} {
		fi, err := os.Stat(filepath.Join(target, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s in the backup: %v %v", f, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("backup folder mode: %v", err)
	}

	// A backup never overwrites, and needs a data folder.
	if _, err := tally(t, "", "serve", "backup", "--data", data, target); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second backup into the same folder: %v", err)
	}
	if _, err := tally(t, "", "serve", "backup", "--data", t.TempDir(), filepath.Join(t.TempDir(), "b")); err == nil || !strings.Contains(err.Error(), "no database in") {
		t.Errorf("backup of an empty folder: %v", err)
	}

	// Restore: serve the copy. The seat's account, sync credential and
	// channel membership are all in it.
	p.stop()
	r := serveInProcess(t, serveOptions{Data: target})
	rg := []string{"--home", home, "--api-url", r.apiURL, "--relay-url", r.relURL}
	mustTally(t, append(rg, "add", "after the restore")...)
	if out := mustTally(t, append(rg, "push")...); !strings.HasPrefix(out, "pushed ") {
		t.Fatalf("push to the restored serve: %q", out)
	}
	if out := mustTally(t, append(rg, "pull")...); !strings.HasPrefix(out, "pulled ") {
		t.Fatalf("pull from the restored serve: %q", out)
	}
}
