package mls

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRatchetTree checks the ratchet_tree decoder (§12.4.3.3): it never
// panics, a decoded tree re-encodes to the same bytes, and the operations a
// joiner runs on an untrusted tree (hashing, resolutions, validation) do not
// panic either.
func FuzzRatchetTree(f *testing.F) {
	s := treeTestSuite(f)
	for _, seed := range ratchetTreeSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := decodeRatchetTree(s, data)
		if err != nil {
			return
		}
		if got := tr.encode(); !bytes.Equal(got, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, data)
		}
		tr.treeHash()
		for x := range nodeIndex(tr.width()) {
			tr.resolution(x, nil)
		}
		for l := range leafIndex(tr.size()) {
			tr.filteredDirectPath(l)
		}
		if tr.validateStructure() == nil {
			_ = tr.verifyParentHashes()
		}
	})
}

// ratchetTreeSeeds returns trees from the tree-validation vectors when
// they are around, and a small generated tree in any case.
func ratchetTreeSeeds(f *testing.F) [][]byte {
	g := newTreeSim(f, 5)
	g.commit(0, nil, nil, 4, true)
	g.commit(2, nil, []leafIndex{1}, 1, false)
	seeds := [][]byte{g.tree.encode()}
	dir := os.Getenv("MLS_VECTORS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "mls-vectors")
	}
	data, err := os.ReadFile(filepath.Join(dir, "tree-validation.json"))
	if err != nil {
		return seeds
	}
	var cases []struct {
		CipherSuite CipherSuite `json:"cipher_suite"`
		Tree        hexBytes    `json:"tree"`
	}
	if json.Unmarshal(data, &cases) != nil {
		return seeds
	}
	for _, c := range cases {
		if c.CipherSuite == MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519 && len(c.Tree) < 8192 {
			seeds = append(seeds, c.Tree)
		}
	}
	return seeds
}
