package seat

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/skytale-oss/skytale/mls"
)

// Ratchet trees out of band.
//
// A Welcome or a GroupInfo can carry the room's ratchet tree (the
// ratchet_tree extension) or leave it to be "provided out of band" (RFC
// 9420 §12.4.3.3). In band the tree grows every Welcome and GroupInfo by
// a few hundred bytes per member (about 1.4 KB in the post-quantum suite),
// and the directory's caps (256 KiB per Welcome, 1 MiB per GroupInfo)
// would bind at about 1,000 members (100 post-quantum). So while the tree
// is under inlineTree bytes it travels in band, in one round trip, and
// beyond that the seat puts it at the directory in parts first
// (PUT /v1/channels/tree, named by the hex of its tree hash) and sends
// the Welcome or GroupInfo without it. A joiner that finds no tree in its
// Welcome or GroupInfo fetches it by the tree_hash of the GroupContext it
// opened (mls.JoinOptions.FetchTree), and the engine refuses a tree that
// does not hash to it: the directory holds the bytes but cannot change
// them unnoticed.

const (
	// inlineTree is the size from which a room's tree goes out of band.
	inlineTree = 64 << 10
	// treePart is the size of the parts a tree is put and read in (the
	// directory's cap, directory.MaxTreePart).
	treePart = 1 << 20
	// maxTreeParts bounds the parts of a tree (directory.MaxTreeParts).
	maxTreeParts = 64
	// maxTree is the largest tree the seat puts or reads, 64 MiB
	// (directory.MaxTree): about 25,000 members in the post-quantum
	// suite.
	maxTree = treePart * maxTreeParts
)

// errTreeGone: the directory answered that it holds no such tree (it was
// replaced by newer ones, or never put); a kind of ErrTreeUnavailable.
var errTreeGone = errors.New("seat: the directory holds no such ratchet tree")

// treeTrouble reports whether err is about an out-of-band tree, which
// the join loops must not take for a Welcome that is not theirs.
func treeTrouble(err error) bool {
	return errors.Is(err, ErrTreeMismatch) || errors.Is(err, ErrTreeUnavailable)
}

// treeID is the directory's name for the tree whose tree hash is h.
func treeID(h []byte) string { return hex.EncodeToString(h) }

// treeDelivery is how a Commit adding members to g sends the tree: in the
// Welcome while g's tree is small, out of band from inlineTree on.
func treeDelivery(g *mls.Group) mls.TreeDelivery {
	if g.RatchetTreeSize() < inlineTree {
		return mls.TreeInBand
	}
	return mls.TreeOutOfBand
}

// addMembers is the build of a Commit that adds the KeyPackages kps to
// r, with the tree as treeDelivery says (commitWithRetry puts an
// out-of-band tree at the directory before the Commit goes out).
func addMembers(r *room, kps ...[]byte) (*mls.CommitResult, error) {
	return r.g.Commit(mls.CommitOptions{Add: kps, Tree: treeDelivery(r.g)})
}

// TreeInfo is the state of a ratchet tree the directory holds for a
// channel.
type TreeInfo struct {
	Channel  string `json:"channel"`
	ID       string `json:"id"`
	Parts    int    `json:"parts"`
	Received int    `json:"received"`
	Size     int64  `json:"size"`
	Complete bool   `json:"complete"`
}

// PutTreePart stores part of this account's tree id of channel, the tree
// of the group at epoch, which has parts parts in all
// (PUT /v1/channels/tree). The directory takes a tree only for the epoch
// the relay's commit fence has reached or the next (a Welcome's tree, put
// before its Commit goes out); others are an *APIError stale_epoch or
// epoch_not_reached.
func (c *DirectoryClient) PutTreePart(ctx context.Context, channel, id string, epoch uint64, part, parts int, data []byte) (TreeInfo, error) {
	var out TreeInfo
	err := c.call(ctx, "PUT", "/v1/channels/tree",
		map[string]any{"channel": channel, "id": id, "epoch": epoch, "part": part, "parts": parts, "data": data}, &out)
	return out, err
}

// TreeInfo returns the state of the tree id of channel.
func (c *DirectoryClient) TreeInfo(ctx context.Context, channel, id string) (TreeInfo, error) {
	var out TreeInfo
	err := c.call(ctx, "GET", treePath(channel, id), nil, &out)
	return out, err
}

// TreePart returns part of the complete tree id of channel.
func (c *DirectoryClient) TreePart(ctx context.Context, channel, id string, part int) (TreeInfo, []byte, error) {
	var out struct {
		TreeInfo
		Data []byte `json:"data"`
	}
	err := c.call(ctx, "GET", treePath(channel, id)+"&part="+strconv.Itoa(part), nil, &out)
	return out.TreeInfo, out.Data, err
}

func treePath(channel, id string) string {
	return "/v1/channels/tree?channel=" + url.QueryEscape(channel) + "&id=" + url.QueryEscape(id)
}

// PutTree puts tree at the directory as this account's tree id of
// channel, the tree of the group at epoch, in parts. Its first part comes
// back complete when the account has put the whole tree already (a
// Welcome's tree that its GroupInfo names again), and then no other part
// is sent. Whether the directory holds a complete tree of that id is not
// asked first: the answer could be another account's tree under the same
// id (any member knows a tree's hash once the Commit is out), which the
// directory keeps apart from this account's and hands out only after the
// tree of whoever put the GroupInfo. It fails unless the directory holds
// all of it at the end.
func (c *DirectoryClient) PutTree(ctx context.Context, channel, id string, epoch uint64, tree []byte) error {
	if len(tree) == 0 || len(tree) > maxTree {
		return fmt.Errorf("seat: a ratchet tree of %d bytes cannot be put (at most %d)", len(tree), maxTree)
	}
	// Padded, like every payload the directory keeps (blob.go).
	tree = padBlob(tree, maxTree)
	parts := (len(tree) + treePart - 1) / treePart
	var info TreeInfo
	for i := range parts {
		var err error
		if info, err = c.PutTreePart(ctx, channel, id, epoch, i, parts, tree[i*treePart:min((i+1)*treePart, len(tree))]); err != nil {
			return fmt.Errorf("seat: putting part %d of %d of the ratchet tree of %s: %w", i+1, parts, channel, err)
		}
		if info.Complete {
			break
		}
	}
	if !info.Complete || info.Size != int64(len(tree)) {
		return fmt.Errorf("seat: the directory holds %d of %d parts of the ratchet tree of %s", info.Received, parts, channel)
	}
	return nil
}

// FetchTree reads the complete tree id of channel from the directory, in
// parts. It buffers no more than the size the first part announces, and
// never more than 64 MiB; a tree that is not there, or whose parts do not
// add up, is ErrTreeUnavailable.
func (c *DirectoryClient) FetchTree(ctx context.Context, channel, id string) ([]byte, error) {
	info, first, err := c.TreePart(ctx, channel, id, 0)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == 404 {
			return nil, fmt.Errorf("%w: %w: %s, tree %.16s…", ErrTreeUnavailable, errTreeGone, channel, id)
		}
		return nil, err
	}
	tree, err := assembleTree(info, first, func(part int) (TreeInfo, []byte, error) { return c.TreePart(ctx, channel, id, part) })
	if err != nil {
		return nil, fmt.Errorf("%w: %s, tree %.16s…: %v", ErrTreeUnavailable, channel, id, err)
	}
	return unpadBlob(tree), nil
}

// assembleTree checks the announced shape of a tree (info, with its first
// part) and reads the other parts with next: every part but the last is
// full, and they add up to info.Size, which is at most maxTree. The
// buffer is sized from info.Size before any other part is read, so a
// directory that lies about the size gets an error, not more memory.
func assembleTree(info TreeInfo, first []byte, next func(part int) (TreeInfo, []byte, error)) ([]byte, error) {
	if info.Size <= 0 || info.Size > maxTree || info.Parts < 1 || info.Parts > maxTreeParts {
		return nil, fmt.Errorf("a tree of %d bytes in %d parts is out of bounds", info.Size, info.Parts)
	}
	if want := int((info.Size + treePart - 1) / treePart); info.Parts != want {
		return nil, fmt.Errorf("%d bytes do not make %d parts", info.Size, info.Parts)
	}
	tree := make([]byte, 0, info.Size)
	part := first
	for i := 0; ; i++ {
		want := treePart
		if i == info.Parts-1 {
			want = int(info.Size) - i*treePart
		}
		if len(part) != want {
			return nil, fmt.Errorf("part %d has %d bytes, not %d", i, len(part), want)
		}
		tree = append(tree, part...)
		if i == info.Parts-1 {
			return tree, nil
		}
		pi, data, err := next(i + 1)
		if err != nil {
			return nil, err
		}
		if pi.Parts != info.Parts || pi.Size != info.Size {
			return nil, errors.New("the tree changed while it was read")
		}
		part = data
	}
}

// putTree puts the tree of tree hash h, the group's tree at epoch, at
// the directory for ch.
func (s *Seat) putTree(ctx context.Context, ch string, epoch uint64, h, tree []byte) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	return s.directory(key).PutTree(ctx, ch, treeID(h), epoch, tree)
}

// treeStale reports whether err is the directory's answer to a tree put
// for an epoch the relay's commit fence has passed: the Commit the tree
// was for is at a stale epoch too, which the relay says when it refuses
// it, and the seat catches up and builds it again (commitWithRetry).
func treeStale(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == "stale_epoch"
}

// treeFetcher returns a FetchTree for the joins of ch: it reads the tree
// of the tree hash it is given from the directory, once per tree hash
// (a join that tries several suites or KeyPackages asks again).
func (s *Seat) treeFetcher(ctx context.Context, ch string) func([]byte) ([]byte, error) {
	var lastHash, lastTree []byte
	return func(h []byte) ([]byte, error) {
		if lastHash != nil && bytes.Equal(h, lastHash) {
			return lastTree, nil
		}
		key, err := s.apiKey(ctx)
		if err != nil {
			return nil, err
		}
		tree, err := s.directory(key).FetchTree(ctx, ch, treeID(h))
		if err != nil {
			return nil, err
		}
		lastHash, lastTree = bytes.Clone(h), tree
		return tree, nil
	}
}

// fetchedTree wraps a FetchTree and reports whether it handed out a tree,
// so that a join that fails afterwards can say the tree was at fault.
type fetchedTree struct {
	fetch func([]byte) ([]byte, error)
	used  bool
}

func (f *fetchedTree) get(h []byte) ([]byte, error) {
	tree, err := f.fetch(h)
	if err != nil && !treeTrouble(err) {
		err = fmt.Errorf("%w: %w", ErrTreeUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	f.used = true
	return tree, nil
}

// joinError is the error of a join that fetched a tree with f: a Welcome
// or GroupInfo that the fetched tree does not open is ErrTreeMismatch.
func (f *fetchedTree) joinError(ch string, err error) error {
	if err == nil || !f.used || treeTrouble(err) {
		return err
	}
	if errors.Is(err, mls.ErrInvalidWelcome) || errors.Is(err, mls.ErrInvalidSignature) {
		return fmt.Errorf("%w (%s): %v", ErrTreeMismatch, ch, err)
	}
	return err
}

// joinInPlace takes the place a Welcome gave this seat in ch when the
// Welcome's tree is no longer at the directory, which keeps a channel's
// latest few: the room moved on by more than that many epochs while the
// Welcome waited. The Welcome's Commit added a leaf with this seat's
// identity and signature key; an external Commit from the room's latest
// GroupInfo replaces it (a resync, RFC 9420 §12.4.3.2, which every member
// admits, autojoin.go), as [Room.Rejoin] does for a lost room. What
// was sent between the two epochs stays unread, as after a gap.
func (s *Seat) joinInPlace(ctx context.Context, ch string) (*room, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	_, gi, err := s.directory(key).GroupInfo(ctx, ch)
	if err != nil {
		return nil, fmt.Errorf("seat: joining %s: the Welcome's ratchet tree is gone, and no GroupInfo to join from: %w", ch, err)
	}
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.externalCommit(ctx, ch, gi, sig, id, nil)
	if err != nil {
		return nil, fmt.Errorf("seat: joining %s in the place its Welcome gave, after the Welcome's ratchet tree was gone: %w", ch, err)
	}
	return r, nil
}

// shareTree puts g's current tree at the directory when it is too large
// to go in band, and reports whether it went out of band.
func (s *Seat) shareTree(ctx context.Context, ch string, g *mls.Group) (bool, error) {
	if treeDelivery(g) == mls.TreeInBand {
		return false, nil
	}
	return true, s.putTree(ctx, ch, g.Epoch(), g.TreeHash(), g.RatchetTree())
}
