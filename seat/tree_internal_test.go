package seat

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/skytale-oss/skytale/mls"
)

// AddKeyPackages commits the addition of kps to the room in one Commit,
// with the tree as the seat sends it (tree.go). Tests fill rooms with
// members made directly with the mls package this way, far faster than
// by making a seat for each.
func AddKeyPackages(s *Seat, ctx context.Context, name string, kps [][]byte) error {
	return s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUp(ctx, r, nil); err != nil {
			return err
		}
		_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return addMembers(r, kps...) })
		return err
	})
}

// RoomTree returns the room's current ratchet tree and tree hash.
func RoomTree(s *Seat, ctx context.Context, name string) (tree, hash []byte, err error) {
	err = s.withNamedRoom(ctx, name, func(r *room) error {
		tree, hash = r.g.RatchetTree(), r.g.TreeHash()
		return nil
	})
	return tree, hash, err
}

// RoomEpoch returns the room's current epoch.
func RoomEpoch(s *Seat, ctx context.Context, name string) (epoch uint64, err error) {
	err = s.withNamedRoom(ctx, name, func(r *room) error {
		epoch = r.g.Epoch()
		return nil
	})
	return epoch, err
}

// TestAssembleTree: the parts of a tree are taken only as announced.
func TestAssembleTree(t *testing.T) {
	tree := bytes.Repeat([]byte{1, 2, 3}, treePart) // three parts
	parts := func(info TreeInfo) func(int) (TreeInfo, []byte, error) {
		return func(i int) (TreeInfo, []byte, error) {
			return info, tree[i*treePart : min((i+1)*treePart, len(tree))], nil
		}
	}
	good := TreeInfo{Parts: 3, Size: int64(len(tree))}
	got, err := assembleTree(good, tree[:treePart], parts(good))
	if err != nil || !bytes.Equal(got, tree) {
		t.Fatalf("a good tree: %v", err)
	}
	for name, info := range map[string]TreeInfo{
		"too big":        {Parts: 65, Size: maxTree + 1},
		"no size":        {Parts: 1, Size: 0},
		"negative":       {Parts: 1, Size: -1},
		"parts past cap": {Parts: 65, Size: 65 * treePart},
		"too few parts":  {Parts: 2, Size: int64(len(tree))},
		"too many parts": {Parts: 4, Size: int64(len(tree))},
	} {
		if _, err := assembleTree(info, tree[:treePart], parts(info)); err == nil {
			t.Errorf("%s: assembled", name)
		}
	}
	// A short part, or a shape that changes between parts.
	if _, err := assembleTree(good, tree[:treePart-1], parts(good)); err == nil {
		t.Error("a short first part")
	}
	changed := func(i int) (TreeInfo, []byte, error) {
		return TreeInfo{Parts: 3, Size: int64(len(tree)) + 1}, tree[i*treePart : (i+1)*treePart], nil
	}
	if _, err := assembleTree(good, tree[:treePart], changed); err == nil {
		t.Error("a tree whose size changed while it was read")
	}
}

// FuzzAssembleTree: whatever a directory answers, assembling never
// panics, never buffers more than the size it announced (at most 64
// MiB), and what it returns is exactly the parts it was served.
func FuzzAssembleTree(f *testing.F) {
	f.Add(int64(5), 1, []byte("abcde"), []byte{})
	f.Add(int64(treePart+3), 2, bytes.Repeat([]byte{7}, 64), []byte("xyz"))
	f.Add(int64(maxTree+1), 65, []byte{1}, []byte{2})
	f.Add(int64(-1), -1, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, size int64, nparts int, first, rest []byte) {
		// Parts past the first are served from rest: each its own
		// length-prefixed chunk, cut short where rest ends.
		next := func(i int) (TreeInfo, []byte, error) {
			off := 0
			for j := 1; j < i && off+2 <= len(rest); j++ {
				off += 2 + int(binary.BigEndian.Uint16(rest[off:]))
			}
			if off+2 > len(rest) {
				return TreeInfo{Parts: nparts, Size: size}, nil, nil
			}
			n := int(binary.BigEndian.Uint16(rest[off:]))
			end := min(off+2+n, len(rest))
			return TreeInfo{Parts: nparts, Size: size}, rest[off+2 : end], nil
		}
		tree, err := assembleTree(TreeInfo{Parts: nparts, Size: size}, first, next)
		if err != nil {
			return
		}
		if int64(len(tree)) != size || size > maxTree || !bytes.HasPrefix(tree, first) {
			t.Fatalf("assembled %d bytes for a size of %d", len(tree), size)
		}
	})
}

// MaxFrame is the seat's relay read limit, for the test that holds it
// equal to the relay's.
const MaxFrame = maxFrame
