package mls

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Building the full tree of 10,000 members takes minutes, once per process,
// which makes comparing two builds of the package run by run (old, new,
// old, new, ...) slow. With MLS_BENCH_FIXTURES set to a directory, a
// fixture is saved there after it is built and later processes restore it
// instead: the owner and member from their saved states, the Commit and
// Welcome as bytes, and the joiner's bundle. Builds whose saved-state
// format agree then measure the very same group.
const benchFixtureDirEnv = "MLS_BENCH_FIXTURES"

func benchFixturePath(cs CipherSuite, n int, full bool) string {
	dir := os.Getenv(benchFixtureDirEnv)
	if dir == "" {
		return ""
	}
	shape := "bare"
	if full {
		shape = "full"
	}
	return filepath.Join(dir, fmt.Sprintf("mls-bench-%04x-%s-%d.bin", uint16(cs), shape, n))
}

func (f *benchFixture) marshal(b *builder) {
	b.vec(f.aState)
	b.vec(f.bState)
	b.vec(f.commit)
	b.vec(f.welcome)
	b.vec(marshal(&f.joinBundle.kp))
	b.vec(f.joinBundle.initPriv)
	b.vec(f.joinBundle.encPriv)
	b.vec(f.joinBundle.sigPriv)
}

// loadBenchFixture restores a saved fixture, or returns nil when there is
// none to restore.
func loadBenchFixture(tb testing.TB, cs CipherSuite, path string) *benchFixture {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	f := &benchFixture{}
	var kpData []byte
	jb := &KeyPackageBundle{}
	p := newParser(data)
	if !(p.vec(&f.aState) && p.vec(&f.bState) && p.vec(&f.commit) && p.vec(&f.welcome) &&
		p.vec(&kpData) && p.vec(&jb.initPriv) && p.vec(&jb.encPriv) && p.vec(&jb.sigPriv)) || !p.empty() {
		tb.Fatalf("malformed bench fixture %s", path)
	}
	kp, err := parseKeyPackage(kpData)
	if err != nil {
		tb.Fatalf("bench fixture %s: %v", path, err)
	}
	if jb.s, err = suiteFor(cs); err != nil {
		tb.Fatal(err)
	}
	jb.kp = *kp
	f.joinBundle = jb
	cfg := &Config{}
	if f.a, err = RestoreGroup(f.aState, cfg); err != nil {
		tb.Fatalf("bench fixture %s: %v", path, err)
	}
	if f.b, err = RestoreGroup(f.bState, cfg); err != nil {
		tb.Fatalf("bench fixture %s: %v", path, err)
	}
	// As the members that built the fixture have them.
	f.a.cur.tree.treeHash()
	f.b.cur.tree.treeHash()
	return f
}

func saveBenchFixture(tb testing.TB, path string, f *benchFixture) {
	if err := os.WriteFile(path, marshal(f), 0o600); err != nil {
		tb.Logf("saving bench fixture: %v", err)
	}
}
