package seat

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DirectoryClient speaks the directory's HTTP API. Credential is the Bearer
// credential sent with every call: an API key (sk_live_…, sk_chan_…) or a
// JWT.
type DirectoryClient struct {
	BaseURL    string
	Credential string
	HTTP       *http.Client // nil means http.DefaultClient
	// TokenTTL, if set, is the lifetime Token asks for (1 s to 300 s).
	TokenTTL time.Duration
}

// APIError is a non-2xx answer of either plane.
type APIError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
	// RetryAfter is the answer's Retry-After (0: none, or not in
	// seconds), set on a refusal for load (429, 503).
	RetryAfter time.Duration `json:"-"`
}

// Is makes an APIError match the sentinel of its code: org_taken
// [ErrOrgTaken], invalid_org_invite [ErrInvalidOrgInvite], not_a_member
// [ErrNotMember], rate_limited [ErrRateLimited], and the other codes
// listed in codeSentinels.
func (e *APIError) Is(target error) bool {
	return target != nil && codeSentinels[e.Code] == target
}

// codeSentinels are the errors a server's error code stands for.
var codeSentinels = map[string]error{
	"org_taken":          ErrOrgTaken,
	"invalid_org_invite": ErrInvalidOrgInvite,
	"not_a_member":       ErrNotMember, // the relay
	"not_member":         ErrNotMember, // the directory's member list
	"stale_epoch":        ErrStaleEpoch,
	"removed":            ErrRemovedRoom, // the directory: removed from the channel
	"seat_exists":        ErrSeatExists,
	"not_allowed":        ErrNotAllowed,
	"invalid_add_token":  ErrInvalidAddToken,
	"revoked":            ErrRevoked, // a revoked device's credential
	"rate_limited":       ErrRateLimited,
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("seat: server answered %d", e.Status)
	}
	return fmt.Sprintf("seat: %s (%d %s)", e.Message, e.Status, e.Code)
}

// doJSON sends one JSON request and decodes the answer into out. A read
// refused for load is sent again (retry.go).
func doJSON(ctx context.Context, hc *http.Client, method, u, bearer string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	for attempt := 0; ; attempt++ {
		err := doJSONOnce(ctx, hc, method, u, bearer, body, in != nil, out)
		wait, ok := retryWait(method, err, attempt)
		if !ok {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func doJSONOnce(ctx context.Context, hc *http.Client, method, u, bearer string, in []byte, hasBody bool, out any) error {
	var body io.Reader
	if hasBody {
		body = bytes.NewReader(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
		json.Unmarshal(b, e)
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("seat: bad answer from %s: %w", req.URL.Path, err)
	}
	return nil
}

func (c *DirectoryClient) call(ctx context.Context, method, path string, in, out any) error {
	if c.BaseURL == "" {
		return ErrNoDirectoryURL
	}
	return doJSON(ctx, c.HTTP, method, strings.TrimRight(c.BaseURL, "/")+path, c.Credential, in, out)
}

// Account is the answer of account creation. APIKey is shown only once.
type Account struct {
	AccountID string `json:"account_id"`
	Org       string `json:"org"`
	APIKey    string `json:"api_key"`
}

// CreateAccount creates an account (open signup, or Credential is the
// internal secret). The first account of an org owns it: creating one in
// an org that exists fails with [ErrOrgTaken]; see
// [DirectoryClient.CreateAccountInvited].
func (c *DirectoryClient) CreateAccount(ctx context.Context, email, org string) (Account, error) {
	return c.CreateAccountInvited(ctx, email, org, "")
}

// CreateAccountInvited creates an account in an existing org with an org
// invite (skt_org_…) minted by an account of that org. A bad invite fails
// with [ErrInvalidOrgInvite]. An empty invite is CreateAccount.
func (c *DirectoryClient) CreateAccountInvited(ctx context.Context, email, org, orgInvite string) (Account, error) {
	in := map[string]string{"email": email, "org": org}
	if orgInvite != "" {
		in["org_invite"] = orgInvite
	}
	var a Account
	err := c.call(ctx, "POST", "/v1/accounts", in, &a)
	return a, err
}

// OrgInvite mints an invite into org, the caller's own org, for new
// accounts. Zero values take the directory's defaults (one use, one hour).
func (c *DirectoryClient) OrgInvite(ctx context.Context, org string, maxUses, ttlSeconds int) (string, time.Time, error) {
	return c.mintInvite(ctx, "/v1/orgs/invites", "org", org, maxUses, ttlSeconds)
}

// mintInvite posts an invite request naming what the invite is into
// (key: value) to path. Zero maxUses and ttlSeconds are left out, so the
// directory's defaults apply.
func (c *DirectoryClient) mintInvite(ctx context.Context, path, key, value string, maxUses, ttlSeconds int, extra ...any) (string, time.Time, error) {
	in := map[string]any{key: value}
	for i := 0; i+1 < len(extra); i += 2 {
		in[extra[i].(string)] = extra[i+1]
	}
	if maxUses != 0 {
		in["max_uses"] = maxUses
	}
	if ttlSeconds != 0 {
		in["ttl_seconds"] = ttlSeconds
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	err := c.call(ctx, "POST", path, in, &out)
	return out.Token, out.ExpiresAt, err
}

// Token mints a JWT for the relay from Credential.
func (c *DirectoryClient) Token(ctx context.Context) (string, time.Time, error) {
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	in := map[string]any{"audience": "skytale-relay"}
	if c.TokenTTL > 0 {
		in["ttl_seconds"] = max(1, int(c.TokenTTL/time.Second))
	}
	err := c.call(ctx, "POST", "/v1/tokens", in, &out)
	return out.Token, out.ExpiresAt, err
}

// RegisterChannel registers name for the caller's account (idempotent).
func (c *DirectoryClient) RegisterChannel(ctx context.Context, name string) error {
	return c.call(ctx, "POST", "/v1/channels", map[string]string{"name": name}, nil)
}

// Invite mints an invite token for a channel the caller owns. Zero values
// take the directory's defaults.
func (c *DirectoryClient) Invite(ctx context.Context, channel string, maxUses, ttlSeconds int) (string, time.Time, error) {
	return c.mintInvite(ctx, "/v1/channels/invites", "channel", channel, maxUses, ttlSeconds)
}

// InviteAuto mints an invite whose holder joins the channel at once, by
// external Commit (autojoin.go), for a channel the caller owns.
func (c *DirectoryClient) InviteAuto(ctx context.Context, channel string, maxUses, ttlSeconds int) (string, time.Time, error) {
	return c.mintInvite(ctx, "/v1/channels/invites", "channel", channel, maxUses, ttlSeconds, "auto", true)
}

// InviteAutoHashed registers, for a channel the caller owns, an auto
// invite whose token the caller made: the directory gets only tokenHash,
// the SHA-256 of the token the joiner will show it.
func (c *DirectoryClient) InviteAutoHashed(ctx context.Context, channel string, maxUses, ttlSeconds int, tokenHash []byte) (time.Time, error) {
	_, exp, err := c.mintInvite(ctx, "/v1/channels/invites", "channel", channel, maxUses, ttlSeconds, "auto", true, "token_hash", tokenHash)
	return exp, err
}

// JoinAnswer is the directory's answer to a join request. Auto is set for
// an auto invite: the caller's account is a member of the channel now,
// and GroupInfo (when one was put) is the channel's latest, of Epoch.
type JoinAnswer struct {
	RequestID string  `json:"request_id"`
	Auto      bool    `json:"auto"`
	Epoch     *uint64 `json:"epoch"`
	GroupInfo []byte  `json:"group_info"`
}

// Join publishes a key package for channel with an invite token that
// waits for the owner; it returns the request id to poll. A join by an
// auto invite needs a proof ([DirectoryClient.JoinWith]).
func (c *DirectoryClient) Join(ctx context.Context, channel, token, identity string, keyPackage []byte) (string, error) {
	a, err := c.JoinWith(ctx, channel, token, identity, keyPackage, nil)
	return a.RequestID, err
}

// joinProofLabel starts what a joiner's member key signs to join a
// channel by invite under its identity (the directory's JoinProofLabel).
const joinProofLabel = "skytale invite join v1\x00"

// JoinProof shows the directory, at a join by invite, that the joiner
// holds the member key of the identity it names, so that no joiner can
// tie another person's identity to its account.
type JoinProof struct {
	// Signature is the member key's Ed25519 signature over the join
	// ([SignJoin]).
	Signature []byte
	// DeviceKey is the member key's public half when the identity is a
	// device identity, whose certificate the directory checks.
	DeviceKey []byte
}

// SignJoin makes the proof of a join by account to channel, with token,
// under identity, whose member key is priv: a signature over the label,
// the account id, the channel, the identity and the token's SHA-256,
// each but the last ended by a NUL.
func SignJoin(priv ed25519.PrivateKey, account, channel, identity, token string) JoinProof {
	sum := sha256.Sum256([]byte(token))
	m := []byte(joinProofLabel + account + "\x00" + channel + "\x00" + identity + "\x00")
	p := JoinProof{Signature: ed25519.Sign(priv, append(m, sum[:]...))}
	if PersonOf(identity) != identity {
		p.DeviceKey = priv.Public().(ed25519.PublicKey)
	}
	return p
}

// JoinWith is Join with the whole answer, and a proof for a join by an
// auto invite (nil for none).
func (c *DirectoryClient) JoinWith(ctx context.Context, channel, token, identity string, keyPackage []byte, proof *JoinProof) (JoinAnswer, error) {
	var out JoinAnswer
	in := map[string]any{"channel": channel, "token": token, "identity": identity}
	if keyPackage != nil {
		in["key_package"] = padBlob(keyPackage, maxDirKeyPackage)
	}
	if proof != nil {
		in["proof"] = proof.Signature
		if proof.DeviceKey != nil {
			in["device_key"] = proof.DeviceKey
		}
	}
	err := c.call(ctx, "POST", "/v1/channels/join", in, &out)
	out.GroupInfo = unpadBlob(out.GroupInfo)
	return out, err
}

// PutGroupInfo stores the channel's GroupInfo of epoch, unless the
// directory holds a later one.
func (c *DirectoryClient) PutGroupInfo(ctx context.Context, channel string, epoch uint64, groupInfo []byte) error {
	return c.call(ctx, "PUT", "/v1/channels/groupinfo", map[string]any{"channel": channel, "epoch": epoch, "group_info": padBlob(groupInfo, maxDirGroupInfo)}, nil)
}

// GroupInfo returns the channel's latest GroupInfo and its epoch.
func (c *DirectoryClient) GroupInfo(ctx context.Context, channel string) (uint64, []byte, error) {
	var out struct {
		Epoch     uint64 `json:"epoch"`
		GroupInfo []byte `json:"group_info"`
	}
	err := c.call(ctx, "GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(channel), nil, &out)
	return out.Epoch, unpadBlob(out.GroupInfo), err
}

// JoinRequest is one pending request as the owner sees it. AccountID is
// the account that made the request, when the directory reports it.
type JoinRequest struct {
	ID         string    `json:"id"`
	Identity   string    `json:"identity"`
	AccountID  string    `json:"account_id,omitempty"`
	KeyPackage []byte    `json:"key_package"`
	CreatedAt  time.Time `json:"created_at"`
}

// Pending lists the channel's pending join requests, oldest first.
//
// It follows the directory's pages (at most 50 requests each) up to the
// 1000 a channel holds.
func (c *DirectoryClient) Pending(ctx context.Context, channel string) ([]JoinRequest, error) {
	var all []JoinRequest
	after := ""
	for range maxPendingPages {
		var out struct {
			Requests []JoinRequest `json:"requests"`
			HasMore  bool          `json:"has_more"`
			Next     string        `json:"next"`
		}
		path := "/v1/channels/pending?channel=" + url.QueryEscape(channel)
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := c.call(ctx, "GET", path, nil, &out); err != nil {
			return all, err
		}
		for _, r := range out.Requests {
			r.KeyPackage = unpadBlob(r.KeyPackage)
			all = append(all, r)
		}
		if !out.HasMore {
			return all, nil
		}
		if out.Next == "" || out.Next == after {
			return all, errors.New("seat: the directory's pending page has no cursor to go on from")
		}
		after = out.Next
	}
	return all, errors.New("seat: the directory's pending pages do not end")
}

// maxPendingPages bounds the pages Pending follows: a channel holds at
// most 1000 requests, at least one a page.
const maxPendingPages = 1000

// PublishWelcome hands the Welcome for a request to the joiner.
func (c *DirectoryClient) PublishWelcome(ctx context.Context, requestID string, welcome []byte) error {
	return c.call(ctx, "POST", "/v1/channels/welcome", map[string]any{"request_id": requestID, "welcome": padBlob(welcome, maxDirWelcome)}, nil)
}

// PollWelcome returns the Welcome once the owner has published it, or nil
// while the request is pending.
func (c *DirectoryClient) PollWelcome(ctx context.Context, requestID string) ([]byte, error) {
	var out struct {
		Status  string `json:"status"`
		Welcome []byte `json:"welcome"`
	}
	if err := c.call(ctx, "GET", "/v1/channels/welcome/"+url.PathEscape(requestID), nil, &out); err != nil {
		return nil, err
	}
	if out.Status != "completed" {
		return nil, nil
	}
	return unpadBlob(out.Welcome), nil
}

// AckWelcome drops a completed request.
func (c *DirectoryClient) AckWelcome(ctx context.Context, requestID string) error {
	return c.call(ctx, "POST", "/v1/channels/welcome/"+url.PathEscape(requestID)+"/ack", nil, nil)
}

// seatProofLabel starts what a seat's identity key signs to register the
// identity (the directory's SeatProofLabel): the label, the account id, a
// NUL and the sync channel.
const seatProofLabel = "skytale seat registration v1\x00"

// SeatProof signs the registration of person's identity for account with
// its sync channel, the proof [DirectoryClient.RegisterSeat] carries.
func SeatProof(person *Identity, account, channel string) []byte {
	return ed25519.Sign(person.PrivateKey(), []byte(seatProofLabel+account+"\x00"+channel))
}

// RegisterSeat registers the seat identity with its sync channel, proving
// possession of the identity's key with proof ([SeatProof]), and returns
// the seat id and its channel-scoped credential.
func (c *DirectoryClient) RegisterSeat(ctx context.Context, identity, channel string, proof []byte) (seatID, credential string, err error) {
	var out struct {
		SeatID     string `json:"seat_id"`
		Credential string `json:"credential"`
	}
	err = c.call(ctx, "POST", "/v1/seats", map[string]any{"identity": identity, "channel": channel, "proof": proof}, &out)
	return out.SeatID, out.Credential, err
}

// Revoke revokes did:skytale:<sub>.
func (c *DirectoryClient) Revoke(ctx context.Context, sub string) error {
	return c.call(ctx, "POST", "/v1/revocations", map[string]string{"did": "did:skytale:" + sub}, nil)
}

// ChannelMembers is a channel's owner and member accounts, oldest first.
type ChannelMembers struct {
	Channel string          `json:"channel"`
	Owner   string          `json:"owner"`
	Members []ChannelMember `json:"members"`
}

// ChannelMember is one member account of a channel.
type ChannelMember struct {
	AccountID string    `json:"account_id"`
	AddedAt   time.Time `json:"added_at"`
}

// Members lists the member accounts of a channel, for its owner and its
// members. The relay carries a channel's traffic only for these accounts.
// The directory answers the list in pages, which Members follows.
func (c *DirectoryClient) Members(ctx context.Context, channel string) (ChannelMembers, error) {
	var all ChannelMembers
	after := ""
	for range maxListPages {
		var out struct {
			ChannelMembers
			HasMore bool   `json:"has_more"`
			Next    string `json:"next"`
		}
		path := "/v1/channels/members?channel=" + url.QueryEscape(channel)
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := c.call(ctx, "GET", path, nil, &out); err != nil {
			return all, err
		}
		all.Channel, all.Owner = out.Channel, out.Owner
		all.Members = append(all.Members, out.Members...)
		if !out.HasMore {
			return all, nil
		}
		if out.Next == "" || out.Next == after {
			return all, errors.New("seat: the directory's member page has no cursor to go on from")
		}
		after = out.Next
	}
	return all, errors.New("seat: the directory's member pages do not end")
}

// maxListPages bounds the pages Members and Stock follow: far more than
// any channel's members or any stock's claims fill (at least 100 entries
// a page), few enough that a directory answering pages without end
// cannot keep a seat reading.
const maxListPages = 10000

// AddMember makes an account a member of a channel the caller owns
// (idempotent).
func (c *DirectoryClient) AddMember(ctx context.Context, channel, accountID string) error {
	return c.call(ctx, "POST", "/v1/channels/members", map[string]string{"channel": channel, "account_id": accountID}, nil)
}

// RemoveMember ends an account's membership of a channel: the owner may
// remove any member but itself, a member itself. Removing an account that
// is not a member succeeds.
func (c *DirectoryClient) RemoveMember(ctx context.Context, channel, accountID string) error {
	q := url.Values{"channel": {channel}, "account_id": {accountID}}
	return c.call(ctx, "DELETE", "/v1/channels/members?"+q.Encode(), nil, nil)
}

// IdentityRemoval is the directory's answer to [DirectoryClient.RemoveIdentity].
type IdentityRemoval struct {
	// Ended lists the accounts whose membership of the channel ended.
	Ended []string `json:"ended"`
	// Kept reports that an account that joined under the identity kept
	// its membership, for another identity it joined under.
	Kept bool `json:"kept"`
}

// RemoveIdentity ends, for the owner of channel, the membership of the
// accounts that joined it by auto invite under identity, and records them
// as removed, so that no invite made before readmits them.
func (c *DirectoryClient) RemoveIdentity(ctx context.Context, channel, identity string) (IdentityRemoval, error) {
	var out IdentityRemoval
	q := url.Values{"channel": {channel}, "identity": {identity}}
	err := c.call(ctx, "DELETE", "/v1/channels/members?"+q.Encode(), nil, &out)
	return out, err
}

// ResetFence makes the relay expect the next commit of channel, which
// this account owns, at epoch (POST /v1/channels/fence).
func (c *DirectoryClient) ResetFence(ctx context.Context, channel string, epoch uint64) error {
	in := struct {
		Channel string `json:"channel"`
		Epoch   uint64 `json:"epoch"`
	}{channel, epoch}
	return c.call(ctx, "POST", "/v1/channels/fence", in, nil)
}

// InviteJoin is one of a channel's invite-join records, as its owner
// reads them: an account that joined by auto invite under Identity at
// JoinedAt, whose record its owner may lapse from LapsesAt on if Identity
// is not in the group.
type InviteJoin struct {
	Identity  string    `json:"identity"`
	AccountID string    `json:"account_id"`
	JoinedAt  time.Time `json:"joined_at"`
	LapsesAt  time.Time `json:"lapses_at"`
}

// InviteJoins lists, for the owner of channel, the channel's invite-join
// records, oldest first (GET /v1/channels/invite-joins, every page).
func (c *DirectoryClient) InviteJoins(ctx context.Context, channel string) ([]InviteJoin, error) {
	var all []InviteJoin
	after := ""
	for range maxListPages {
		var out struct {
			Joins   []InviteJoin `json:"joins"`
			HasMore bool         `json:"has_more"`
			Next    string       `json:"next"`
		}
		q := url.Values{"channel": {channel}}
		if after != "" {
			q.Set("after", after)
		}
		if err := c.call(ctx, "GET", "/v1/channels/invite-joins?"+q.Encode(), nil, &out); err != nil {
			return all, err
		}
		all = append(all, out.Joins...)
		if !out.HasMore {
			return all, nil
		}
		if out.Next == "" || out.Next == after {
			return all, errors.New("seat: the directory's invite-join page has no cursor to go on from")
		}
		after = out.Next
	}
	return all, errors.New("seat: the directory's invite-join pages do not end")
}

// Lapsed is what a lapse of invite-join records did: the identities whose
// records lapsed, those whose records are still in their grace, and the
// accounts whose channel membership ended.
type Lapsed struct {
	Lapsed  []string `json:"lapsed"`
	Waiting []string `json:"waiting"`
	Ended   []string `json:"ended"`
}

// maxLapse is how many identities one lapse request names.
const maxLapse = 32

// LapseInviteJoins lapses, for the owner of channel, whose group is at
// epoch, the invite-join records of identities, none of which is in the
// group (POST /v1/channels/invite-joins/lapse, at most 32 a request).
func (c *DirectoryClient) LapseInviteJoins(ctx context.Context, channel string, epoch uint64, identities []string) (Lapsed, error) {
	var out Lapsed
	in := struct {
		Channel    string   `json:"channel"`
		Epoch      uint64   `json:"epoch"`
		Identities []string `json:"identities"`
	}{channel, epoch, identities}
	err := c.call(ctx, "POST", "/v1/channels/invite-joins/lapse", in, &out)
	return out, err
}

// IdentityRecorded reports whether an account joined channel by auto
// invite under identity, as the directory recorded at the join (GET
// /v1/channels/identities); for the channel's owner and members.
func (c *DirectoryClient) IdentityRecorded(ctx context.Context, channel, identity string) (bool, error) {
	var out struct {
		Recorded bool `json:"recorded"`
	}
	q := url.Values{"channel": {channel}, "identity": {identity}}
	err := c.call(ctx, "GET", "/v1/channels/identities?"+q.Encode(), nil, &out)
	return out.Recorded, err
}
