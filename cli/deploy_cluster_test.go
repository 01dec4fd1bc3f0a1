package cli

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	ucli "github.com/urfave/cli/v2"
)

// serveArgs checks args (what follows `tally serve`) against serve's
// flags: each --name is a flag, and each flag that takes a value has one.
// It returns the flags named.
func serveArgs(t *testing.T, file string, args []string) map[string]string {
	t.Helper()
	takes := map[string]bool{}
	for _, f := range serveCommand().Flags {
		_, isBool := f.(*ucli.BoolFlag)
		for _, n := range f.Names() {
			takes[n] = !isBool
		}
	}
	got := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "$") {
			continue // expanded by systemd from the environment file
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		wants, ok := takes[name]
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("%s passes %q, which is not a flag of tally serve", file, a)
			continue
		}
		if wants && !hasValue {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				t.Errorf("%s: --%s has no value", file, name)
				continue
			}
			i++
			value = args[i]
		}
		got[name] = value
	}
	return got
}

// TestDeployClusterFiles: the cluster's deploy files name real flags of
// tally serve, give every node the cluster's two secrets (a node joining
// a cluster generates none), start the relays on the three NATS servers
// at three replicas, and the NATS configuration is one nats-server takes.
func TestDeployClusterFiles(t *testing.T) {
	compose, err := os.ReadFile("../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	relays := 0
	for _, m := range regexp.MustCompile(`(?m)^    command: (\[.*\])$`).FindAllStringSubmatch(string(compose), -1) {
		var args []string
		if err := json.Unmarshal([]byte(m[1]), &args); err != nil {
			t.Fatalf("compose.yaml: a command is not a JSON list: %v", err)
		}
		if !slices.Contains(args, "--data") {
			continue // not tally serve
		}
		flags := serveArgs(t, "compose.yaml", args)
		for _, f := range []string{"jwt-secret-file", "internal-secret-file"} {
			if !strings.HasPrefix(flags[f], "/run/secrets/") {
				t.Errorf("compose.yaml: a node without --%s from the compose secrets: %v", f, args)
			}
		}
		if flags["only"] == "relay" {
			relays++
			if len(strings.Split(flags["relay-nats"], ",")) != 3 || flags["relay-nats-replicas"] != "3" {
				t.Errorf("compose.yaml: a relay not on the three NATS servers at three replicas: %v", args)
			}
		}
	}
	if relays != 3 {
		t.Errorf("compose.yaml starts %d relays, want 3", relays)
	}
	for _, n := range []string{"nats-1", "nats-2", "nats-3", "postgres", "directory"} {
		if !strings.Contains(string(compose), "\n  "+n+":\n") {
			t.Errorf("compose.yaml has no service %s", n)
		}
	}

	t.Setenv("NATS_NAME", "nats-1")
	opts, err := natsserver.ProcessConfigFile("../deploy/cluster/nats.conf")
	if err != nil {
		t.Fatalf("deploy/cluster/nats.conf: %v", err)
	}
	if !opts.JetStream || opts.MaxPayload < 17<<20 || len(opts.Routes) != 3 || opts.ServerName != "nats-1" {
		t.Errorf("deploy/cluster/nats.conf: JetStream %v, max_payload %d, %d routes, name %q", opts.JetStream, opts.MaxPayload, len(opts.Routes), opts.ServerName)
	}

	unit, err := os.ReadFile("../deploy/tally@.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=\S*tally serve (.*)$`).FindStringSubmatch(string(unit))
	if m == nil {
		t.Fatal("deploy/tally@.service has no ExecStart of tally serve")
	}
	base := strings.Fields(m[1])
	if !slices.Contains(base, "$TALLY_SERVE_FLAGS") {
		t.Error("deploy/tally@.service does not pass $TALLY_SERVE_FLAGS")
	}
	for _, env := range []string{"relay.env", "directory.env"} {
		b, err := os.ReadFile("../deploy/cluster/" + env)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^TALLY_SERVE_FLAGS=(.*)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("deploy/cluster/%s sets no TALLY_SERVE_FLAGS", env)
		}
		flags := serveArgs(t, env, append(slices.Clone(base), strings.Fields(m[1])...))
		if flags["jwt-secret-file"] == "" || flags["internal-secret-file"] == "" || flags["only"] == "" || flags["health-addr"] == "" {
			t.Errorf("tally@.service with %s: %v", env, flags)
		}
	}
}
