package mls

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCredentialSummaryCarried checks that the credential summary a tree
// carries through adds, updates and removals (afterLeafChange) is always
// the one computed from its leaves: the types in use in the order of their
// first leaf, and the types every member supports.
func TestCredentialSummaryCarried(t *testing.T) {
	s := treeTestSuite(t)
	tmpl, _, _ := newTreeTestLeaf(t, s, "a")
	rng := rand.New(rand.NewPCG(1, 2))
	types := []CredentialType{1, 2, 7}
	leaf := func() *LeafNode {
		ln := *tmpl
		ln.Credential = Credential{CredentialType: types[rng.IntN(len(types))], Identity: []byte("x")}
		var caps []CredentialType
		for _, ct := range types {
			if rng.IntN(4) != 0 || ct == ln.Credential.CredentialType {
				caps = append(caps, ct)
			}
		}
		ln.Capabilities.Credentials = caps
		return &ln
	}
	tr := newRatchetTree(s, leaf())
	carried := 0
	for step := range 3000 {
		var members []leafIndex
		for l := range leafIndex(tr.size()) {
			if tr.leafNode(l) != nil {
				members = append(members, l)
			}
		}
		switch r := rng.IntN(10); {
		case r < 4 || len(members) < 3:
			tr.addLeaf(leaf())
		case r < 6:
			if err := tr.removeLeaf(members[rng.IntN(len(members))]); err != nil {
				t.Fatal(err)
			}
		case r < 8:
			// Same credential type and supported types: an UpdatePath.
			l := members[rng.IntN(len(members))]
			ln := *tr.leafNode(l)
			ln.Capabilities.Credentials = slices.Clone(ln.Capabilities.Credentials)
			tr.setNode(l.node(), treeNode{Leaf: &ln})
		default:
			l := members[rng.IntN(len(members))]
			tr.setNode(l.node(), treeNode{Leaf: leaf()})
		}
		if tr.memberCount() == 0 {
			tr.addLeaf(leaf())
		}
		want := summarizeCredentials(tr)
		if got := tr.creds; got != nil {
			carried++
			if !slices.Equal(got.inUse, want.inUse) || !slices.Equal(got.firstLeaf, want.firstLeaf) {
				t.Fatalf("step %d: carried types in use %v at %v, want %v at %v", step, got.inUse, got.firstLeaf, want.inUse, want.firstLeaf)
			}
			for _, ct := range types {
				if slices.Contains(got.supportedByAll, ct) != slices.Contains(want.supportedByAll, ct) {
					t.Fatalf("step %d: carried summary says type %d supported by all: %v, want %v", step, ct, !slices.Contains(want.supportedByAll, ct), slices.Contains(want.supportedByAll, ct))
				}
			}
		}
		tr.creds = want
		if c := tr.clone(); c.creds != tr.creds {
			t.Fatal("clone dropped the summary")
		}
	}
	if carried < 1000 {
		t.Fatalf("summary carried over only %d of 3000 changes", carried)
	}
}
