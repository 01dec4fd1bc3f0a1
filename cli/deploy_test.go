package cli

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

// deployedServeArgs returns the arguments after `tally serve` that the
// systemd unit and the Dockerfile in deploy/ run serve with.
func deployedServeArgs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	unit, err := os.ReadFile("../deploy/tally.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=\S*tally serve (.*)$`).FindStringSubmatch(string(unit))
	if m == nil {
		t.Fatal("deploy/tally.service has no ExecStart of tally serve")
	}
	out["tally.service"] = strings.Fields(m[1])

	docker, err := os.ReadFile("../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var entry, cmd []string
	for _, line := range strings.Split(string(docker), "\n") {
		for _, p := range []struct {
			prefix string
			dst    *[]string
		}{{"ENTRYPOINT ", &entry}, {"CMD ", &cmd}} {
			if v, ok := strings.CutPrefix(line, p.prefix); ok {
				if err := json.Unmarshal([]byte(v), p.dst); err != nil {
					t.Fatalf("Dockerfile %s is not a JSON list: %v", p.prefix, err)
				}
			}
		}
	}
	if len(entry) != 2 || !strings.HasSuffix(entry[0], "/tally") || entry[1] != "serve" {
		t.Fatalf("Dockerfile ENTRYPOINT %q, want tally serve", entry)
	}
	out["Dockerfile"] = cmd
	return out
}

// TestDeployFilesUseRealFlags: every flag the systemd unit and the
// Dockerfile pass is a flag of tally serve, and serve starts with them
// (on a temporary folder and ephemeral loopback ports instead of theirs).
func TestDeployFilesUseRealFlags(t *testing.T) {
	var names, switches []string
	for _, f := range serveCommand().Flags {
		names = append(names, f.Names()...)
		if _, ok := f.(*ucli.BoolFlag); ok {
			switches = append(switches, f.Names()...)
		}
	}
	for file, args := range deployedServeArgs(t) {
		if len(args) == 0 {
			t.Fatalf("%s passes serve no flags", file)
		}
		cmdline := []string{"tally", "serve"}
		for i := 0; i < len(args); i++ {
			a := args[i]
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !strings.HasPrefix(a, "--") || !slices.Contains(names, name) {
				t.Errorf("%s passes %q, which is not a flag of tally serve", file, a)
				continue
			}
			switch name {
			case "data":
				cmdline = append(cmdline, a, t.TempDir())
				i++
			case "api-addr", "relay-addr", "health-addr", "metrics-addr":
				cmdline = append(cmdline, a, "127.0.0.1:0")
				i++
			default:
				cmdline = append(cmdline, a)
				if !hasValue && !slices.Contains(switches, name) && i+1 < len(args) {
					i++
					cmdline = append(cmdline, args[i])
				}
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		errw := &cancelOn{marker: "relay listening", cancel: cancel}
		err := run(ctx, cmdline, strings.NewReader(""), &syncBuffer{}, errw)
		if err != nil || !strings.Contains(errw.String(), "directory listening") {
			t.Errorf("%s: tally %s: %v\n%s", file, strings.Join(cmdline[1:], " "), err, errw.String())
		}
		cancel()
	}
}
