package cli

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestReadmeQuickStart checks the two commands the README opens with: the
// first runs `tally serve` as written (default flags, data folder in the
// working directory), the second is exactly the test command CI runs.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README has no sh block")
	}
	var cmds []string
	for _, line := range strings.Split(string(block[1]), "\n") {
		if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) != "" {
			cmds = append(cmds, strings.TrimSpace(cmd))
		}
	}
	if len(cmds) != 2 {
		t.Fatalf("README quick start has %d commands, want 2: %q", len(cmds), cmds)
	}
	if cmds[0] != "go run ./cli/tally serve" {
		t.Fatalf("first command %q", cmds[0])
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n"+cmds[1]+"\n") {
		t.Fatalf(".ci/run does not run the README's test command %q", cmds[1])
	}

	// Run serve as written, on its default addresses, from a fresh folder.
	for _, addr := range []string{"127.0.0.1:3100", "127.0.0.1:8443"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("%s is in use here; cannot run the quick start as written", addr)
		}
		ln.Close()
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TALLY_TEST_AS_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v", err)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("serve did not stop on SIGTERM")
		}
	}()
	for _, u := range []string{"http://127.0.0.1:3100/health", "http://127.0.0.1:8443/health"} {
		waitfor.Nil(t, 20*time.Second, func() error {
			resp, err := http.Get(u)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return nil
				}
			}
			return fmt.Errorf("%s never answered: %v", u, err)
		})
	}
	for _, f := range []string{"jwt_secret", "internal_secret", "directory.db", "relay.db"} {
		if _, err := os.Stat(filepath.Join(dir, "tally-data", f)); err != nil {
			t.Errorf("tally-data/%s: %v", f, err)
		}
	}
}
