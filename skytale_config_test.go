package skytale_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/relay"
)

// TestNewStackSecrets: a JWT secret shorter than 32 bytes is refused with
// a line that says so; the secrets are set once, in StackConfig, and a
// sub-config that disagrees is refused rather than silently overwritten.
func TestNewStackSecrets(t *testing.T) {
	good := bytes.Repeat([]byte{7}, skytale.MinJWTSecret)
	for _, c := range []struct {
		name string
		cfg  skytale.StackConfig
		want string
	}{
		{"none", skytale.StackConfig{}, "stack needs a JWT secret"},
		{"five bytes", skytale.StackConfig{JWTSecret: []byte("short")}, "the JWT secret is 5 bytes; it must be at least 32 random bytes"},
		{"31 bytes", skytale.StackConfig{JWTSecret: good[:31]}, "the JWT secret is 31 bytes"},
		{"directory's differs", skytale.StackConfig{JWTSecret: good, Directory: skytale.DirectoryConfig{JWTSecret: []byte("other secret, 32 bytes long.....")}}, "set the JWT secret once"},
		{"relay's differs", skytale.StackConfig{JWTSecret: good, Relay: skytale.RelayConfig{JWTSecret: []byte("x")}}, "set the JWT secret once"},
		{"internal differs", skytale.StackConfig{JWTSecret: good, InternalSecret: []byte("a"), Directory: skytale.DirectoryConfig{InternalSecret: []byte("b")}}, "set the internal secret once"},
		{"relay members", skytale.StackConfig{JWTSecret: good, Relay: skytale.RelayConfig{Members: relay.NewMemberSet()}}, "leave StackConfig.Relay.Revocations and Members nil"},
	} {
		st, err := skytale.NewStack(context.Background(), c.cfg)
		if err == nil {
			st.Close(context.Background())
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "skytale: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// The same value twice is not a conflict.
	st, err := skytale.NewStack(context.Background(), skytale.StackConfig{JWTSecret: good, Directory: skytale.DirectoryConfig{JWTSecret: good}})
	if err != nil {
		t.Fatal(err)
	}
	st.Close(context.Background())
}

// TestConfigDocs: go doc skytale.DirectoryConfig and RelayConfig say
// what the main fields are, not only "see directory.Config".
func TestConfigDocs(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "skytale.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE || g.Doc == nil {
			continue
		}
		for _, s := range g.Specs {
			docs[s.(*ast.TypeSpec).Name.Name] = g.Doc.Text()
		}
	}
	for name, fields := range map[string][]string{
		"DirectoryConfig": {"DBPath", "JWTSecret", "InternalSecret", "OpenSignup", "Logger", "[directory.Config]"},
		"RelayConfig":     {"DBPath", "JWTSecret", "Members", "OpenChannels", "Revocations", "[relay.Config]"},
		"StackConfig":     {"JWTSecret", "InternalSecret", "once"},
	} {
		for _, f := range fields {
			if !strings.Contains(docs[name], f) {
				t.Errorf("the doc of %s does not mention %s:\n%s", name, f, docs[name])
			}
		}
	}
}
