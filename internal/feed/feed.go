// Package feed holds the shape of the directory's channel feed: the ordered
// changes to channel membership and commit fences that a relay applies.
// The directory writes it; the relay reads it in-process or over
// GET /v1/internal/channels/events with the internal secret.
package feed

// Kinds of [Event].
const (
	// MemberAdded: Account now belongs to Channel.
	MemberAdded = "member_added"
	// MemberRemoved: Account no longer belongs to Channel; the relay ends
	// its live subscriptions there.
	MemberRemoved = "member_removed"
	// FenceReset: the channel's owner set the commit epoch the relay
	// expects next on Channel to Epoch.
	FenceReset = "fence_reset"
)

// Event is one change to a channel. IDs grow strictly in feed order.
type Event struct {
	ID      int64  `json:"id"`
	Kind    string `json:"kind"`
	Channel string `json:"channel"`
	Account string `json:"account_id,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
}

// Page is the JSON body of GET /v1/internal/channels/events?after=N:
// the events with an id above N, in order, and the cursor to pass next
// (N itself when there is nothing new).
type Page struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
}

// PageSize is the most events one page carries.
const PageSize = 1000
