package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// FenceSource tells the directory where a channel's commit fence stands:
// the epoch the relay expects the channel's next commit at (a commit at
// epoch e is accepted only while the relay expects e, and then it expects
// e+1), and known false while the channel has had no commit nor fence
// reset. The directory keeps a channel's GroupInfo only for that epoch
// (groupinfo.go). A relay embedded in the same process is one
// (relay.Server.NextEpoch, wired by skytale.NewStack); a relay elsewhere
// is read with [NewHTTPFence].
type FenceSource interface {
	NextEpoch(ctx context.Context, channel string) (epoch uint64, known bool, err error)
}

// Errors of the fence check, answered by groupInfoFail.
var (
	errNoFence          = errors.New("directory: no commit fence is configured (Config.Fence)")
	errFenceUnavailable = errors.New("directory: the relay's commit fence cannot be read")
)

// fenceTimeout bounds one read of the fence.
const fenceTimeout = 5 * time.Second

// fenceEpoch returns the only epoch a GroupInfo of channel may have now:
// the epoch the fence expects next, which is the epoch the group entered
// with the last commit the relay accepted (or was reset to). A channel
// with no fence yet has had no commit, so its group is still at the
// epoch of its creation, 0 (RFC 9420 §11: a new group starts at epoch 0,
// and each Commit moves it to the next one).
func (s *Server) fenceEpoch(ctx context.Context, channel string) (uint64, error) {
	if s.cfg.Fence == nil {
		return 0, errNoFence
	}
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	epoch, known, err := s.cfg.Fence.NextEpoch(ctx, channel)
	if err != nil {
		s.log.Error("directory: reading the commit fence failed", "err", err)
		return 0, errFenceUnavailable
	}
	if !known {
		return 0, nil
	}
	return epoch, nil
}

// NewHTTPFence returns a FenceSource that reads a relay's
// GET /v1/internal/fence with the internal secret (the relay's
// Config.InternalSecret), for a directory that runs apart from its relay.
// A nil client means http.DefaultClient. relayURL may name several relays
// of one cluster (they share the fence), separated by commas: a read goes
// to the relay that answered last, and to the next in turn when that one
// fails or does not answer within fenceTry.
func NewHTTPFence(relayURL, internalSecret string, client *http.Client) FenceSource {
	if client == nil {
		client = http.DefaultClient
	}
	var bases []string
	for _, u := range strings.Split(relayURL, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			bases = append(bases, u)
		}
	}
	if len(bases) == 0 {
		bases = []string{""}
	}
	return &httpFence{bases: bases, secret: internalSecret, client: client}
}

type httpFence struct {
	bases  []string
	secret string
	client *http.Client
	cur    atomic.Int32 // the index in bases of the relay that answered last
}

// fenceTry bounds one relay's answer when there are others to ask.
const fenceTry = 3 * time.Second

func (f *httpFence) NextEpoch(ctx context.Context, channel string) (uint64, bool, error) {
	first := int(f.cur.Load())
	var err error
	for k := range f.bases {
		i := (first + k) % len(f.bases)
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if len(f.bases) > 1 {
			tctx, cancel = context.WithTimeout(ctx, fenceTry)
		}
		var epoch uint64
		var known bool
		epoch, known, err = f.nextEpochFrom(tctx, f.bases[i], channel)
		cancel()
		if err == nil {
			f.cur.Store(int32(i))
			return epoch, known, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return 0, false, err
}

// maxFenceAnswer bounds the body of a fence answer the directory reads.
const maxFenceAnswer = 4 << 10

func (f *httpFence) nextEpochFrom(ctx context.Context, base, channel string) (uint64, bool, error) {
	u := base + "/v1/internal/fence?" + url.Values{"channel": {channel}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, false, fmt.Errorf("directory: fence request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+f.secret)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("directory: fence request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxFenceAnswer))
		return 0, false, fmt.Errorf("directory: fence request: status %d", resp.StatusCode)
	}
	var a struct {
		Channel string  `json:"channel"`
		Epoch   *uint64 `json:"epoch"`
		Known   *bool   `json:"known"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxFenceAnswer)).Decode(&a); err != nil {
		return 0, false, fmt.Errorf("directory: fence answer: %w", err)
	}
	if a.Channel != channel || a.Epoch == nil || a.Known == nil {
		return 0, false, errors.New("directory: fence answer: not the fence of the channel asked for")
	}
	return *a.Epoch, *a.Known, nil
}

// fencedPut checks a put for epoch in channel of what the directory keeps
// for joiners (a GroupInfo, a tree): the caller must be the channel's
// owner or a member (before anything about the fence is said), and epoch
// must lie from the fence's epoch to ahead epochs past it (409
// stale_epoch below, epoch_not_reached above, each naming the fence's
// epoch; window says what is accepted). It returns the fence's epoch, or
// false once it has answered.
func (s *Server) fencedPut(w http.ResponseWriter, r *http.Request, p principal, channel string, epoch *uint64, ahead uint64, window string) (uint64, bool) {
	switch {
	case epoch == nil:
		badRequest(w, "epoch is required")
		return 0, false
	case *epoch > math.MaxInt64:
		badRequest(w, "epoch must be at most 9223372036854775807")
		return 0, false
	}
	if _, err := memberChannel(r.Context(), s.store, channel, p.account); err != nil {
		s.fail(w, r, err)
		return 0, false
	}
	fence, err := s.fenceEpoch(r.Context(), channel)
	if err != nil {
		s.groupInfoFail(w, r, err)
		return 0, false
	}
	switch {
	case *epoch < fence:
		writeEpochError(w, "stale_epoch", "the relay's commit fence is past that epoch; "+window, fence)
		return 0, false
	case *epoch-fence > ahead:
		writeEpochError(w, "epoch_not_reached", "the relay's commit fence has not reached that epoch; "+window, fence)
		return 0, false
	}
	return fence, true
}
