package directory

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// filesHolding names the files in dir that hold any 32-byte piece of b,
// taken every 256 bytes (a blob larger than a page is split over
// overflow pages, so it is never found whole).
func filesHolding(t *testing.T, dir string, b []byte) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // a -wal or -shm file removed meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b); i += 256 {
			if bytes.Contains(data, b[i:min(i+32, len(b))]) {
				out = append(out, e.Name())
				break
			}
		}
	}
	return out
}

// TestConsumedWelcomeLeavesNoBytes: once the joiner has collected and
// acknowledged its Welcome, neither the Welcome nor the completed join
// request (identity, key package) is left anywhere in the directory's
// files, free pages and WAL included, after the next checkpoint.
func TestConsumedWelcomeLeavesNoBytes(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(c *Config) {
		c.DBPath = filepath.Join(dir, "directory.db")
		c.CheckpointInterval = 20 * time.Millisecond
	})
	_, owner := e.account("acme")
	_, joiner := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	// Large enough to spill into overflow pages, small enough for a row.
	kp, welcome := random(6000), random(9000)
	identity := "did:web:" + base64.RawURLEncoding.EncodeToString(random(18)) + ".example"
	r := e.join(joiner, ch, e.invite(owner, ch, 1), identity, kp)
	want(t, r, 201, "")
	id := r.str("request_id")
	// The test can see the bytes while they are stored.
	seen := func(name string, b []byte) {
		t.Helper()
		if len(filesHolding(t, dir, b)) == 0 {
			t.Fatalf("the %s is in no file while it is stored", name)
		}
	}
	seen("key package", kp)
	seen("identity", []byte(identity))
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{
		"request_id": id, "welcome": base64.StdEncoding.EncodeToString(welcome),
	}), 200, "")
	r = e.do("GET", "/v1/channels/welcome/"+id, joiner, nil)
	want(t, r, 200, "")
	if got, _ := base64.StdEncoding.DecodeString(r.str("welcome")); !bytes.Equal(got, welcome) {
		t.Fatal("the joiner did not get its Welcome")
	}
	seen("welcome", welcome)
	if r := e.do("POST", "/v1/channels/welcome/"+id+"/ack", joiner, nil); r.body["acked"] != true {
		t.Fatalf("ack = %s", r)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := map[string][]string{}
		for name, b := range map[string][]byte{"key package": kp, "welcome": welcome, "identity": []byte(identity)} {
			if f := filesHolding(t, dir, b); len(f) > 0 {
				left[name] = f
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the ack and checkpoints, still in the files: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
