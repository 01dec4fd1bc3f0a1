package mls

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestVectorMutations checks that the checkers compare every value a
// vector gives: changing any hex field of the first
// case of each file, at its first and at its last byte, must make the case
// fail.
func TestVectorMutations(t *testing.T) {
	dir := vectorsDir(t)
	// Mutations that rightly change nothing: only the first KDF.Nh bytes
	// of the ciphertext are sampled for the sender data key (§6.3.2).
	unchecked := map[string]bool{
		"secret-tree.json: sender_data.ciphertext last": true,
		// tree-operations applies an Add without checking the KeyPackage
		// signature, which the resulting tree does not contain.
		"tree-operations.json: proposal last": true,
		// ...and only an Update uses the sender index; the first case is
		// an Add.
		"tree-operations.json: proposal_sender": true,
	}
	for _, name := range []string{
		"key-schedule.json", "message-protection.json", "psk_secret.json",
		"secret-tree.json", "transcript-hashes.json", "welcome.json",
		"tree-operations.json", "tree-validation.json", "treekem.json",
		"passive-client-welcome.json", "passive-client-handling-commit.json",
		"tree-math.json", "deserialization.json",
	} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Skip(err)
			}
			var cases []any
			if err := json.Unmarshal(data, &cases); err != nil {
				t.Fatal(err)
			}
			// The first case with at least one PSK, for psk_secret.json.
			base := cases[0]
			switch name {
			case "psk_secret.json":
				base = cases[2]
			case "tree-math.json": // 128 leaves rather than one
				base = cases[7]
			}
			run := func(c any) vectorReport {
				b, err := json.Marshal([]any{c})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := checkVectorFile(name, b)
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			if rep := run(base); rep.Passed != 1 {
				t.Fatalf("unmutated case does not pass: %v", rep.Failures)
			}
			n := 0
			for _, path := range hexPaths(base, "") {
				for _, end := range []string{"first", "last"} {
					if unchecked[name+": "+path+" "+end] {
						continue
					}
					c := mutateHex(t, base, path, end == "last")
					n++
					if rep := run(c); rep.Failed != 1 {
						t.Errorf("%s changed at its %s byte: not detected", path, end)
					}
				}
			}
			for _, path := range numPaths(base, "") {
				if path == "cipher_suite" || unchecked[name+": "+path] {
					continue // an input that selects the suite, not an expected value
				}
				c := mutateNum(t, base, path)
				n++
				if rep := run(c); rep.Failed != 1 {
					t.Errorf("%s incremented: not detected", path)
				}
			}
			t.Logf("%d mutations", n)
		})
	}
}

// hexPaths lists the dotted paths of the non-empty hex strings in v.
func hexPaths(v any, prefix string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "label" {
				continue
			}
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = append(out, hexPaths(e, p)...)
		}
	case []any:
		for i, e := range x {
			out = append(out, hexPaths(e, fmt.Sprintf("%s.%d", prefix, i))...)
		}
	case string:
		if b, err := hex.DecodeString(x); err == nil && len(b) > 0 {
			out = append(out, prefix)
		}
	}
	return out
}

// mutateHex returns a deep copy of v with the hex string at path changed in
// its first or last byte.
func mutateHex(t *testing.T, v any, path string, last bool) any {
	b, _ := json.Marshal(v)
	var c any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var walk func(v any, p string) any
	walk = func(v any, p string) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				q := k
				if p != "" {
					q = p + "." + k
				}
				x[k] = walk(e, q)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e, fmt.Sprintf("%s.%d", p, i))
			}
		case string:
			if p == path {
				raw, _ := hex.DecodeString(x)
				if last {
					raw[len(raw)-1] ^= 0x01
				} else {
					raw[0] ^= 0x10
				}
				return hex.EncodeToString(raw)
			}
		}
		return v
	}
	return walk(c, "")
}

// numPaths lists the dotted paths of the numbers in v; of a long array
// only the first and last elements are listed.
func numPaths(v any, prefix string) []string {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out = append(out, numPaths(e, join(k))...)
		}
	case []any:
		for i, e := range x {
			if len(x) > 8 && i != 0 && i != len(x)-1 {
				continue
			}
			out = append(out, numPaths(e, join(fmt.Sprint(i)))...)
		}
	case float64:
		out = append(out, prefix)
	}
	return out
}

// mutateNum returns a deep copy of v with the number at path incremented.
func mutateNum(t *testing.T, v any, path string) any {
	b, _ := json.Marshal(v)
	var c any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var walk func(v any, p string) any
	walk = func(v any, p string) any {
		join := func(k string) string {
			if p == "" {
				return k
			}
			return p + "." + k
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e, join(k))
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e, join(fmt.Sprint(i)))
			}
		case float64:
			if p == path {
				return x + 1
			}
		}
		return v
	}
	return walk(c, "")
}
