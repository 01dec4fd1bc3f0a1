package seat

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// KeyPackage stock: adding a person who is offline.
//
// Each device keeps a stock of one-time join offers (a KeyPackage of each
// room suite, suites.go) and one last-resort offer at the directory
// ([Seat.Restock]), under this seat's registered identity; their private
// keys stay in the home, sealed. An owner or admin adds a person
// ([Room.Add]) who agreed to it: they share a room or an org, or the
// person gave the adder an add-token ([Seat.ContactToken]). The directory
// hands out one offer per device of that person (the last-resort one,
// reused, when a device's one-time stock is empty or the hourly limits are
// reached), the admin checks that every offer is the person's
// ([ErrNotThePerson]), commits the adds and leaves each Welcome in the
// person's directory inbox. The person's next command or running watch
// joins from the inbox and accepts the Welcome, which makes their account
// a member of the room's channel ([Seat.ProcessInbox]); until then they
// can list it ([Seat.PendingRooms]) and decline it ([Room.Decline]).
// The directory tells the stock's owner which offers were claimed, by
// whom, for which channel ([Seat.ContactClaims]); a claimed last-resort
// offer is replaced at the next restock (its private keys are kept for the
// Welcomes still to come from it).

// Stock levels of one device: restocked below stockLow, up to stockFill.
const (
	stockLow  = 10
	stockFill = 30
	// stockBatch is how many offers go in one upload.
	stockBatch = 10
)

// StockStatus is what the directory holds of an account's stock.
type StockStatus struct {
	Devices []StockDevice `json:"devices"`
	Claims  []StockClaim  `json:"claims"`
}

// StockDevice is one device's stock.
type StockDevice struct {
	Device     string `json:"device"`
	OneTime    int    `json:"one_time"`
	LastResort bool   `json:"last_resort"`
}

// StockClaim says an offer of the account was claimed.
type StockClaim struct {
	ID         string    `json:"id"`
	Device     string    `json:"device"`
	Channel    string    `json:"channel"`
	ClaimedBy  string    `json:"claimed_by"`
	LastResort bool      `json:"last_resort"`
	At         time.Time `json:"at"`
}

// Claim is one offer handed out by POST /v1/keypackages/claim.
type Claim struct {
	// AccountID is the claimed person's account.
	AccountID  string `json:"account_id"`
	ClaimID    string `json:"claim_id"`
	Device     string `json:"device"`
	KeyPackage []byte `json:"key_package"`
	LastResort bool   `json:"last_resort"`
}

// InboxEntry is a Welcome waiting in the caller's inbox.
type InboxEntry struct {
	ID      string    `json:"id"`
	Channel string    `json:"channel"`
	Device  string    `json:"device"`
	From    string    `json:"from"`
	Welcome []byte    `json:"welcome"`
	At      time.Time `json:"at"`
}

// PublishStock uploads join offers of device to the caller's stock.
// device is the seat's identity, or a device identity of it whose device
// key is deviceKey (nil for the seat's own identity), which the directory
// checks against the identity's signature in the name.
func (c *DirectoryClient) PublishStock(ctx context.Context, device string, deviceKey []byte, offers [][]byte, lastResort []byte) error {
	padded := make([][]byte, len(offers))
	for i, o := range offers {
		padded[i] = padBlob(o, maxDirKeyPackage)
	}
	in := map[string]any{"device": device, "key_packages": padded}
	if deviceKey != nil {
		in["device_key"] = deviceKey
	}
	if offers == nil {
		in["key_packages"] = [][]byte{}
	}
	if lastResort != nil {
		in["last_resort"] = padBlob(lastResort, maxDirKeyPackage)
	}
	return c.call(ctx, "POST", "/v1/keypackages", in, nil)
}

// Stock returns the caller's stock and the claims not acknowledged yet.
// The directory answers the claims in pages, which Stock follows.
func (c *DirectoryClient) Stock(ctx context.Context) (StockStatus, error) {
	var all StockStatus
	after := ""
	for range maxListPages {
		var out struct {
			StockStatus
			HasMore bool   `json:"has_more"`
			Next    string `json:"next"`
		}
		path := "/v1/keypackages"
		if after != "" {
			path += "?after=" + url.QueryEscape(after)
		}
		if err := c.call(ctx, "GET", path, nil, &out); err != nil {
			return all, err
		}
		all.Devices = out.Devices
		all.Claims = append(all.Claims, out.Claims...)
		if !out.HasMore {
			return all, nil
		}
		if out.Next == "" || out.Next == after {
			return all, errors.New("seat: the directory's stock page has no cursor to go on from")
		}
		after = out.Next
	}
	return all, errors.New("seat: the directory's stock pages do not end")
}

// AckClaims acknowledges the claims up to and including the claim id.
func (c *DirectoryClient) AckClaims(ctx context.Context, through string) error {
	return c.call(ctx, "DELETE", "/v1/keypackages/claims?through="+url.QueryEscape(through), nil, nil)
}

// ClaimKeyPackages claims one offer per device of account, for channel.
// An account given as a did: is the account whose seat registered that
// person's identity.
func (c *DirectoryClient) ClaimKeyPackages(ctx context.Context, account, channel string) ([]Claim, error) {
	return c.ClaimKeyPackagesWith(ctx, account, channel, "")
}

// ClaimKeyPackagesWith is ClaimKeyPackages with an add-token of the
// person (skipped when ""); with an add-token, account may be "" to claim
// the offers of the token's maker.
func (c *DirectoryClient) ClaimKeyPackagesWith(ctx context.Context, account, channel, addToken string) ([]Claim, error) {
	var out struct {
		Claims []Claim `json:"claims"`
	}
	in := map[string]string{"channel": channel}
	switch {
	case strings.HasPrefix(account, "did:"):
		in["identity"] = account
	case account != "":
		in["account_id"] = account
	}
	if addToken != "" {
		in["add_token"] = addToken
	}
	err := c.call(ctx, "POST", "/v1/keypackages/claim", in, &out)
	for i := range out.Claims {
		out.Claims[i].KeyPackage = unpadBlob(out.Claims[i].KeyPackage)
	}
	return out.Claims, err
}

// Deliver leaves the Welcome made from a claim in the claimed account's
// inbox.
func (c *DirectoryClient) Deliver(ctx context.Context, claimID string, welcome []byte) error {
	return c.call(ctx, "POST", "/v1/inbox", map[string]any{"claim_id": claimID, "welcome": padBlob(welcome, maxDirWelcome)}, nil)
}

// InboxPage lists a page of the Welcomes waiting for the caller, after
// the cursor after ("" for the first page): at most 50 entries and 4 MiB
// of Welcomes. next is the cursor of the page after, "" when there is
// none.
func (c *DirectoryClient) InboxPage(ctx context.Context, after string) (entries []InboxEntry, next string, err error) {
	var out struct {
		Entries []InboxEntry `json:"entries"`
		HasMore bool         `json:"has_more"`
		Next    string       `json:"next"`
	}
	path := "/v1/inbox"
	if after != "" {
		path += "?after=" + url.QueryEscape(after)
	}
	if err := c.call(ctx, "GET", path, nil, &out); err != nil {
		return nil, "", err
	}
	for i := range out.Entries {
		out.Entries[i].Welcome = unpadBlob(out.Entries[i].Welcome)
	}
	if !out.HasMore {
		return out.Entries, "", nil
	}
	if out.Next == "" || out.Next == after {
		return nil, "", errors.New("seat: the directory's inbox page has no cursor to go on from")
	}
	return out.Entries, out.Next, nil
}

// maxInboxPages bounds the pages Inbox follows: the directory's inbox
// holds at most 200 entries, at least one a page.
const maxInboxPages = 200

// Inbox lists the Welcomes waiting for the caller, following the pages.
func (c *DirectoryClient) Inbox(ctx context.Context) ([]InboxEntry, error) {
	var all []InboxEntry
	err := c.eachInboxPage(ctx, func(page []InboxEntry) error {
		all = append(all, page...)
		return nil
	})
	return all, err
}

// eachInboxPage calls f with each page of the caller's inbox in turn.
func (c *DirectoryClient) eachInboxPage(ctx context.Context, f func([]InboxEntry) error) error {
	after := ""
	for range maxInboxPages {
		page, next, err := c.InboxPage(ctx, after)
		if err != nil {
			return err
		}
		if err := f(page); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		after = next
	}
	return errors.New("seat: the directory's inbox pages do not end")
}

// AckInbox drops (declines) an inbox entry; the sender learns nothing.
func (c *DirectoryClient) AckInbox(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", "/v1/inbox/"+url.PathEscape(id), nil, nil)
}

// AcceptInbox accepts an inbox entry: the caller becomes a member of its
// channel, and the entry is dropped.
func (c *DirectoryClient) AcceptInbox(ctx context.Context, id string) error {
	return c.call(ctx, "POST", "/v1/inbox/"+url.PathEscape(id)+"/accept", nil, nil)
}

// newOffer makes a join offer of this device and stores its private keys
// (sealed) under its ref, before anything leaves the home.
func (s *Seat) newOffer(ctx context.Context, lastResort bool) ([]byte, error) {
	offer, bundles, _, err := s.joinOffer(ctx)
	if err != nil {
		return nil, err
	}
	priv, err := encodeBundles(bundles)
	if err != nil {
		return nil, err
	}
	l, err := s.sealer()
	if err != nil {
		return nil, err
	}
	ref := "stock:" + hex.EncodeToString(bundles[0].Ref())
	if lastResort {
		ref = "stock-lr:" + hex.EncodeToString(bundles[0].Ref())
	}
	_, err = s.st.db.ExecContext(ctx, `INSERT INTO key_packages(request_id, channel, private, created_at) VALUES (?, '', ?, ?)`,
		ref, l.seal(sealedKeyPackage, ref, priv), s.cfg.Now().UnixMilli())
	clear(priv)
	if err != nil {
		return nil, err
	}
	return offer, nil
}

// joinOffer makes a join offer of this device (suites.go): a KeyPackage
// of each room suite, since whoever adds it knows the room's suite and
// this device may not. It returns the offer, its bundles and the member
// identity they name.
func (s *Seat) joinOffer(ctx context.Context) (offer []byte, bundles []*mls.KeyPackageBundle, id string, err error) {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return nil, nil, "", err
	}
	var kps [][]byte
	for _, cs := range roomSuites {
		b, err := mls.NewKeyPackage(cs, id, sig, s.mlsConfig())
		if err != nil {
			return nil, nil, "", err
		}
		bundles = append(bundles, b)
		kps = append(kps, b.Bytes())
	}
	return encodeOffer(kps), bundles, id, nil
}

// Restock tops this device's stock at the directory up, replaces a
// last-resort offer that was claimed, and acknowledges the claims. It
// returns how many offers it uploaded.
func (s *Seat) Restock(ctx context.Context) (int, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return 0, err
	}
	sig, device, err := s.memberKey(ctx)
	if err != nil {
		return 0, err
	}
	// Offers are taken only under an identity the account registered: a
	// home that never connected registers its seat first. A registration
	// refused because the identity is registered already (by another
	// device of this person) leaves the upload to tell.
	if _, err := s.st.meta(ctx, "seat_credential"); err != nil {
		if _, err := s.Connect(ctx); err != nil && !errors.Is(err, ErrSeatExists) {
			return 0, err
		}
	}
	var deviceKey []byte
	if PersonOf(device) != device {
		deviceKey = ed25519.NewKeyFromSeed(sig).Public().(ed25519.PublicKey)
	}
	dir := s.directory(key)
	st, err := dir.Stock(ctx)
	if err != nil {
		return 0, err
	}
	have, lastResort := 0, false
	for _, d := range st.Devices {
		if d.Device == device {
			have, lastResort = d.OneTime, d.LastResort
		}
	}
	for _, c := range st.Claims {
		if c.Device == device && c.LastResort {
			lastResort = false // claimed: a fresh one replaces it
		}
	}
	need, sent := 0, 0
	if have < stockLow {
		need = stockFill - have
	}
	for need > 0 || !lastResort {
		n := min(stockBatch, need)
		var offers [][]byte
		for range n {
			o, err := s.newOffer(ctx, false)
			if err != nil {
				return sent, err
			}
			offers = append(offers, o)
		}
		var lr []byte
		if !lastResort {
			if lr, err = s.newOffer(ctx, true); err != nil {
				return sent, err
			}
		}
		if err := dir.PublishStock(ctx, device, deviceKey, offers, lr); err != nil {
			return sent, fmt.Errorf("seat: uploading join offers: %w", err)
		}
		need, sent, lastResort = need-n, sent+n, true
	}
	if err := s.recordClaims(ctx, st.Claims); err != nil {
		return sent, err
	}
	if n := len(st.Claims); n > 0 {
		if err := dir.AckClaims(ctx, st.Claims[n-1].ID); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Added is one device [Room.Add] added.
type Added struct {
	Identity string
	// LastResort says its offer was the device's last-resort one.
	LastResort bool
}

// addTokenPrefix starts every add-token.
const addTokenPrefix = "skt_add_"

// addPerson is [Room.Add] on the room called name, with addToken the
// person's add-token or "".
func (s *Seat) addPerson(ctx context.Context, name, person, addToken string) ([]Added, error) {
	var out []Added
	err := s.withNamedRoom(ctx, name, func(r *room) error {
		if err := s.catchUpSettled(ctx, r, nil); err != nil {
			return err
		}
		if !r.g.Active() {
			return ErrRemovedRoom
		}
		if !r.manages() {
			return ErrNotAdmin
		}
		key, err := s.apiKey(ctx)
		if err != nil {
			return err
		}
		dir := s.directory(key)
		claims, err := dir.ClaimKeyPackagesWith(ctx, person, r.channel, addToken)
		var ae *APIError
		if errors.As(err, &ae) && ae.Code == "no_key_packages" {
			return fmt.Errorf("%w (%s)", ErrNoStock, person)
		}
		if err != nil {
			return err
		}
		if err := checkClaims(person, claims); err != nil {
			return err
		}
		for _, c := range claims {
			// A device its person revoked is never added (revocation.go).
			if kps, err := decodeOffer(c.KeyPackage); err == nil && s.offerRevoked(ctx, kps) {
				continue
			}
			res, err := s.admitOffer(ctx, r, c.KeyPackage)
			if err != nil {
				if errors.Is(err, mls.ErrInvalidLeafNode) || errors.Is(err, mls.ErrInvalidProposal) || errors.Is(err, errBadOffer) {
					continue // a device in the room already
				}
				return err
			}
			if err := dir.Deliver(ctx, c.ClaimID, res.Welcome); err != nil {
				return fmt.Errorf("seat: %s is in the room, but its Welcome could not be delivered: %w", c.Device, err)
			}
			// The account behind the new leaf, so that removing it ends
			// the account's channel membership too: the one asked for, or
			// (asked by did:key or add-token) the one the directory names.
			account := person
			if person == "" || strings.HasPrefix(person, "did:") {
				account = c.AccountID
			}
			s.rememberAccount(ctx, r.channel, c.Device, account)
			out = append(out, Added{Identity: c.Device, LastResort: c.LastResort})
		}
		return nil
	})
	return out, err
}

// checkClaims checks, before anyone is added, that every KeyPackage of
// every claimed offer names the person asked for: its leaf's credential
// passes the seat's Authentication Service (validateCredential, RFC 9420
// §5.3.1) with the leaf's own signature key (the KeyPackage's signatures
// checked under it, §10.1), its identity is the device the claim names,
// and its person is the did:key asked for, or, asked by account or
// add-token, one and the same person for all of them. The directory is
// not trusted to have checked any of it.
func checkClaims(asked string, claims []Claim) error {
	want := ""
	if strings.HasPrefix(asked, "did:") {
		want = PersonOf(asked)
	}
	for _, c := range claims {
		kps, err := decodeOffer(c.KeyPackage)
		if err != nil {
			return fmt.Errorf("%w: the offer for %s is malformed", ErrNotThePerson, c.Device)
		}
		for _, kp := range kps {
			cred, sigKey, err := mls.KeyPackageLeaf(kp)
			if err != nil {
				return fmt.Errorf("%w: the offer for %s: %v", ErrNotThePerson, c.Device, err)
			}
			if err := validateCredential(cred, sigKey); err != nil {
				return fmt.Errorf("%w: the offer for %s: %v", ErrNotThePerson, c.Device, err)
			}
			id := string(cred.Identity)
			if id != c.Device {
				return fmt.Errorf("%w: the offer said to be %s names %s", ErrNotThePerson, c.Device, PersonOf(id))
			}
			if want == "" {
				want = PersonOf(id)
			} else if PersonOf(id) != want {
				return fmt.Errorf("%w: an offer names %s, not %s", ErrNotThePerson, PersonOf(id), want)
			}
		}
	}
	return nil
}

// ProcessInbox joins the rooms whose Welcomes wait in this account's
// inbox for this device, and returns their channels. Each Welcome it
// joins from is accepted (the directory makes this account a member of
// the room's channel only then; the relay, which learns members from the
// directory, looks again when it meets a member it does not know yet);
// one that turns out not to open with any of this device's offers is
// dropped.
func (s *Seat) ProcessInbox(ctx context.Context) ([]string, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	_, device, err := s.memberKey(ctx)
	if err != nil {
		return nil, err
	}
	s.lockRooms()
	defer s.unlockRooms()
	return s.processInbox(ctx, s.directory(key), device)
}

// processInbox is ProcessInbox for a caller that holds the room lock.
func (s *Seat) processInbox(ctx context.Context, dir *DirectoryClient, device string) ([]string, error) {
	var joined []string
	err := dir.eachInboxPage(ctx, func(entries []InboxEntry) error {
		for _, e := range entries {
			if e.Device != device {
				continue // for another device of this account
			}
			if _, err := s.loadRoom(ctx, e.Channel); err == nil {
				// In the room already (joined, and the accept did not
				// reach the directory): accept now.
				if err := dir.AcceptInbox(ctx, e.ID); err != nil && !isNotFound(err) {
					return err
				}
				continue
			}
			ok, err := s.joinFromStock(ctx, e, func() error {
				if err := dir.AcceptInbox(ctx, e.ID); err != nil && !isNotFound(err) {
					return err
				}
				return nil
			})
			if err != nil {
				return err
			}
			if !ok {
				if err := dir.AckInbox(ctx, e.ID); err != nil && !isNotFound(err) {
					return err
				}
				continue
			}
			joined = append(joined, e.Channel)
			if err := dir.AcceptInbox(ctx, e.ID); err != nil && !isNotFound(err) {
				return err
			}
		}
		return nil
	})
	return joined, err
}

// isNotFound reports a 404 answer: an entry dropped or accepted already.
func isNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == 404
}

// PendingRoom is a Welcome waiting in this account's inbox for this
// device: a room someone added this person to.
type PendingRoom struct {
	ID      string    `json:"id"`
	Channel string    `json:"channel"`
	From    string    `json:"from"`
	At      time.Time `json:"at"`
}

// PendingRooms lists the rooms waiting in this account's inbox for this
// device, without joining them (the next command that looks for arrivals
// does).
func (s *Seat) PendingRooms(ctx context.Context) ([]PendingRoom, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return nil, err
	}
	_, device, err := s.memberKey(ctx)
	if err != nil {
		return nil, err
	}
	out := []PendingRoom{}
	err = s.directory(key).eachInboxPage(ctx, func(entries []InboxEntry) error {
		for _, e := range entries {
			if e.Device == device {
				out = append(out, PendingRoom{ID: e.ID, Channel: e.Channel, From: e.From, At: e.At})
			}
		}
		return nil
	})
	return out, err
}

// declineRoom is [Room.Decline] on the room on channel ch.
func (s *Seat) declineRoom(ctx context.Context, ch string) (int, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return 0, err
	}
	dir := s.directory(key)
	entries, err := dir.Inbox(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.Channel != ch {
			continue
		}
		if err := dir.AckInbox(ctx, e.ID); err != nil && !isNotFound(err) {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, ErrNotPending
	}
	return n, nil
}

// joinFromStock joins the room of e with the stock offer its Welcome is
// for; the caller holds the room lock.
//
// accept accepts the entry at the directory; it is called before a join
// that needs the membership (the external Commit that takes the place
// the Welcome gave, when the room moved on), else the caller accepts once
// joined.
func (s *Seat) joinFromStock(ctx context.Context, e InboxEntry, accept func() error) (bool, error) {
	l, err := s.sealer()
	if err != nil {
		return false, err
	}
	rows, err := s.st.db.QueryContext(ctx, `SELECT request_id, private FROM key_packages WHERE request_id LIKE 'stock%'`)
	if err != nil {
		return false, err
	}
	type offer struct {
		ref  string
		priv []byte
	}
	var offers []offer
	for rows.Next() {
		var o offer
		if err := rows.Scan(&o.ref, &o.priv); err != nil {
			rows.Close()
			return false, err
		}
		offers = append(offers, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, o := range offers {
		priv, err := l.open(sealedKeyPackage, o.ref, o.priv)
		if err != nil {
			return false, err
		}
		bundles, err := decodeBundles(priv)
		clear(priv)
		if err != nil {
			return false, err
		}
		for _, b := range bundles {
			g, err := s.joinWelcome(ctx, e.Channel, e.Welcome, b)
			lastSeq := uint64(0)
			if errors.Is(err, errTreeGone) {
				// The Welcome is this offer's (its tree was asked for
				// only once it opened), but the room moved on.
				var r *room
				if err = accept(); err == nil {
					if r, err = s.joinInPlace(ctx, e.Channel); err == nil {
						g, lastSeq = r.g, r.lastSeq
					}
				}
			}
			if treeTrouble(err) {
				// The Welcome is this offer's, but its tree is not to
				// be had or does not match: keep both for a retry.
				return false, fmt.Errorf("seat: joining %s: %w", e.Channel, err)
			}
			if err != nil {
				continue
			}
			if _, _, err := rolesIn(g.Extensions()); err != nil {
				return false, nil // a room whose roles cannot be read: refused
			}
			if err := s.saveRoom(ctx, &room{channel: e.Channel, role: "member", g: g, lastSeq: lastSeq}, true); err != nil {
				return false, err
			}
			// One-time offers are spent (RFC 9420 §16.8); a last-resort
			// one stays for the Welcomes still to come from it.
			if len(o.ref) > 6 && o.ref[:6] == "stock:" {
				_, err = s.st.db.ExecContext(ctx, `DELETE FROM key_packages WHERE request_id = ?`, o.ref)
			}
			return true, err
		}
	}
	return false, nil
}

// joinFromInbox joins ch from this account's inbox if a Welcome to it
// waits there for this device; the caller holds the room lock.
func (s *Seat) joinFromInbox(ctx context.Context, ch string) bool {
	key, err := s.apiKey(ctx)
	if err != nil {
		return false
	}
	_, device, err := s.memberKey(ctx)
	if err != nil {
		return false
	}
	joined, _ := s.processInbox(ctx, s.directory(key), device)
	return slices.Contains(joined, ch)
}

// Arrivals joins the rooms that wait for this device: those it offered
// itself to as a new device (devicerooms.go) and those whose Welcome is in
// its inbox, and returns their channels. Failures leave them for next
// time.
func (s *Seat) Arrivals(ctx context.Context) []string { return s.arrivals(ctx) }

func (s *Seat) arrivals(ctx context.Context) []string {
	a, _ := s.JoinDeviceRooms(ctx)
	b, _ := s.ProcessInbox(ctx)
	return append(a, b...)
}
