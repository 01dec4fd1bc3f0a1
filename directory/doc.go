// Package directory implements the Skytale directory: the HTTP API that
// holds accounts and API keys, mints short-lived JWTs, registers channels,
// brokers the MLS join handshake (invites, key packages, Welcomes), keeps
// each account's key-package stock, a Welcome inbox and each channel's
// latest GroupInfo, runs the device-grant flow, registers seats, records
// channel members and org ownership, and records revocations.
//
// The directory never parses MLS bytes: key packages, Welcomes and
// GroupInfos cross it as opaque blobs. It stores secrets (API keys, invite, federation and org
// invite tokens, device poll tokens) only as SHA-256 hashes, and a
// device-grant credential only HPKE-sealed to the device's key.
//
// # Mounting
//
// [New] returns a [Server], an [http.Handler] that does not listen on its
// own; mount it on any mux. [Server.Close] stops the background sweep and
// closes the database.
//
// # Connections
//
// The Server does not bound the HTTP connections that reach it: that is
// the listener's job, and an embedder that serves it to the network must
// do it. Set http.Server's ReadHeaderTimeout, ReadTimeout and IdleTimeout
// (tally serve: 10 s, 30 s, 2 minutes), cap the connections accepted in
// total and per client address (tally serve: 4096 per listener, 256 per
// address, 1024 per IPv4 /24 or IPv6 /64, and 64 idle keep-alive
// connections per address, whose oldest is closed when one more goes
// idle), and serve GET /health from a listener of its own if monitors
// must reach it under a flood (tally serve --health-addr). Behind a
// reverse proxy, set Config.TrustedProxies, and count clients by the
// proxy's PROXY protocol header or its own limits rather than by the TCP
// peer, which is the proxy.
//
// # Authentication
//
// Directory endpoints take an "Authorization: Bearer" credential: an
// account API key (sk_live_…), a channel-scoped key (sk_chan_…, issued to
// seats), or a JWT with audience skytale-api minted from either by
// POST /v1/tokens. A channel-scoped credential, or a JWT carrying a "chan"
// claim, acts only on that channel and cannot register seats, approve
// device grants, mint org invites or revoke. A JWT must carry both iat
// and exp, with exp at most 300 seconds after iat (see internal/jwt); the
// directory's own tokens always do. A revoked account's credentials get
// 403. Account creation (in any signup mode, see [SignupMode]), signup
// tokens, the list and removal of idle accounts, revoking any sub, and the
// internal feeds (GET /v1/internal/revocations and
// GET /v1/internal/channels/events) take the internal secret instead.
//
// # Errors
//
// Every error answer is JSON, {"error": code, "message": text}, where code
// is a stable machine-readable string. Codes worth knowing:
//
//   - invalid_json (400): malformed JSON, wrong types, unknown,
//     repeated or case-mismatched keys, or trailing data.
//   - body_too_large, payload_too_large (413): the request body, or a
//     decoded key package (over 65,536 bytes) or Welcome (over 262,144
//     bytes), is over its limit.
//   - invalid_request, invalid_channel, invalid_base64 (400).
//   - unauthorized (401): no credential, or one that is not valid.
//   - forbidden (403), revoked (403), not_owner (403), not_member (403),
//     not_a_member (403, the stock, inbox and GroupInfo endpoints),
//     wrong_org (403), invalid_invite (403), invalid_federation_token
//     (403), org_taken (403), invalid_org_invite (403), not_allowed (403,
//     a claim or delivery by an account the person has not agreed to),
//     invalid_add_token (403), identity_not_yours (403, stock under an
//     identity the uploader did not register), invalid_proof (403, a seat
//     registration, or a join by invite, without a valid proof of the
//     identity's key), proof_required (403, a join by an auto invite
//     with no proof at all, as from a seat that predates proofs).
//   - not_found, channel_not_found, account_not_found, no_key_packages
//     (404); method_not_allowed (405).
//   - channel_taken, seat_exists, already_approved, owner_cannot_leave,
//     stock_full, already_delivered, inbox_full, stale_epoch (409; a
//     stale_epoch answer also carries "epoch", the epoch kept).
//   - too_many_pending (429): a channel already holds 1000 pending join
//     requests; the owner must admit or the requests must expire first.
//     too_many_add_tokens (429): the account holds 100 live add-tokens.
//   - rate_limited (429): the address or account is over a rate limit
//     (see Limits below); too_many_grants (429): the address already has
//     its share of open device grants. Both carry a Retry-After header in
//     whole seconds.
//   - internal (500): a storage failure; nothing is half-applied, since
//     every change is one transaction.
//
// # Device grants
//
// Beyond the base flow (create, approve, poll), an approving device may
// first POST /v1/device/grants/lookup {user_code} to learn the pending
// grant's device_key and label, and then approve with an optional
// sealed_seat: a box of at most 4,096 bytes it sealed to device_key itself.
// The directory cannot open it; it stores it and delivers it exactly once,
// in the poll answer that carries sealed_credential, together with the
// account_id and org the credential acts for. Seats use it to hand a new
// device their transport credential.
//
// # Orgs
//
// An org is owned by its first account: POST /v1/accounts with an org
// nobody has yet creates it. Another account joins an existing org only
// with an org invite, POST /v1/accounts {"email", "org", "org_invite":
// "skt_org_…"}; without one the answer is 403 org_taken, and with one that
// is unknown, expired, used up or of another org it is 403
// invalid_org_invite. The invite's use is consumed in the same transaction
// that creates the account, so concurrent signups never over-use it. Any
// account of the org (with an account-wide credential) mints invites:
// POST /v1/orgs/invites {org, max_uses?, ttl_seconds?} → 201 {"token":
// "skt_org_…", "expires_at"}, with the ranges and defaults of channel
// invites (max_uses 1 to 100, default 1; ttl_seconds 60 to 604800,
// default 3600). The operator (the internal secret, or
// [Server.CreateAccount] in process) creates accounts in any org without
// an invite. Channels are registered only under the caller's org, and the
// org check of federation tokens uses the same owned org, so naming an org
// at signup gives no way into it.
//
// # Channel members and the channel feed
//
// The directory records which accounts belong to each channel, so the
// relay can take publishes (and serve reads) only from members. The owner
// becomes a member when it registers the channel (POST /v1/channels, or
// POST /v1/seats for a seat's sync channel); a joiner when the owner
// publishes its Welcome (federated joins too). Each entry of
// GET /v1/channels/pending carries the requesting account's account_id
// besides the request's id, identity, key_package and created_at, so the
// owner knows which account its Welcome makes a member. Explicit changes:
//
//   - POST /v1/channels/members {channel, account_id} (owner-only,
//     idempotent) → 200 {"channel", "account_id", "member": true}; an
//     unknown account is 404 account_not_found.
//   - DELETE /v1/channels/members?channel=…&account_id=… (the owner, or
//     a member removing itself) → 200 {"channel", "account_id",
//     "member": false}, also when the account was not a member. The owner
//     cannot be removed (409 owner_cannot_leave): it holds the channel's
//     name and is the only account that can admit and remove others, so
//     a channel without it could never be administered again.
//   - DELETE /v1/channels/members?channel=…&identity=… (owner-only) →
//     200 {"channel", "identity", "ended": [account ids], "kept"}: ends
//     the membership of the accounts that joined by auto invite under
//     that identity (the directory keeps, per channel, the identity and
//     account of each auto join), unless an account joined under another
//     identity too ("kept": true). A joiner by auto invite enters the
//     group by its own external commit, so the member that removes it
//     knows only its identity.
//   - An account the owner removed (by account, by identity, or with a
//     fence reset) is recorded as removed from the channel: its join with
//     an invite made before the removal, and its GET of the channel's
//     GroupInfo while it is not a member, are 403 removed. An invite made
//     since readmits it; an account that left by itself is not recorded.
//   - GET /v1/channels/identities?channel=…&identity=… (owner and
//     members; others get 403 not_member, a removed member 403 removed)
//     → 200 {"channel", "identity", "recorded"}: whether an account
//     joined by auto invite under identity, never which.
//   - A join by an auto invite carries proof that the joiner holds the
//     member key of the identity it names ([JoinProof], signed by the
//     did:key, or by a device key with its certificate): without one it
//     is 403 proof_required, with a wrong one 403 invalid_proof, so no
//     joiner ties another person's identity to its account.
//   - GET /v1/channels/invite-joins?channel=…&after=… (owner-only) →
//     200 {"channel", "joins": [{"identity", "account_id", "joined_at",
//     "lapses_at"}], "has_more", "next"?}, oldest first, 500 a page; and
//     POST /v1/channels/invite-joins/lapse {channel, epoch, identities}
//     (owner-only, 1 to 32 identities, epoch the relay's fence) → 200
//     {"channel", "epoch", "lapsed", "waiting", "ended"}: the records of
//     identities that never joined the group, older than [LapseGrace],
//     lapse, their invite uses are given back (once per account and
//     invite), and the memberships only
//     they made end, without a removal being recorded (lapse.go).
//   - GET /v1/channels/members?channel=… (owner and members; others get
//     403 not_member) → 200 {"channel", "owner": account id, "members":
//     [{"account_id", "added_at"}]}, oldest first.
//   - POST /v1/channels/fence {channel, epoch, remove_account_id?}
//     (owner-only) → 200 {"channel", "epoch"}: tells the relay to expect
//     epoch (0 to 2^32) as the next commit epoch on the channel, to
//     recover a room whose fence a member jammed. With
//     remove_account_id, that account's membership ends first, in the
//     same change (naming the owner is 409 owner_cannot_leave).
//
// A channel-scoped credential manages and lists the members of its
// channel only, with the rights of its account there.
//
// Every change writes an event (member_added, member_removed,
// fence_reset; see internal/feed) in the same transaction, with strictly
// increasing ids. [Server.ChannelEventsSince] reads the feed in process
// (a relay in the same process uses it directly), and
// GET /v1/internal/channels/events?after=N with the internal secret
// answers {"events": [{"id", "kind", "channel", "account_id"?,
// "epoch"?}], "next": N'} over HTTP, at most 1000 events a page. A
// revoked account keeps its memberships; the relay refuses revoked subs
// anyway.
//
// # Rooms that work when their owner is away
//
// Four additions let a room grow while its owner is offline. The
// directory still never parses MLS: key packages, Welcomes and GroupInfos
// are opaque bytes to it.
//
// Key-package stock. POST /v1/keypackages {device, key_packages,
// last_resort?, device_key?} adds one-time key packages (each at most
// 65,536 bytes) to the stock of the caller's account and device (the
// member identity, 1 to 256 bytes, no NUL), and with last_resort replaces
// that device's one last-resort key package; 201 {"one_time": n,
// "last_resort": bool}. An offer is bound to its uploader: device is a seat
// identity the account registered (POST /v1/seats {identity, channel,
// proof}, where proof is the identity key's signature over [SeatProof]),
// or a device of it, "<did:key>#dev:z<sig>" with device_key, sig being the
// did:key's signature over [DeviceKeyLabel] and device_key; else 403
// identity_not_yours. At
// most [MaxStockPerDevice] one-time key packages per device and
// [MaxStockDevices] devices per account; over a cap nothing is stored (409
// stock_full). POST /v1/keypackages/claim {account_id | identity |
// add_token, channel, add_token?}, by the owner or a member of channel who
// may add the person (contacts.go: a shared channel, a shared org, or the
// person's add-token, else 403 not_allowed), takes one key package of each
// of the account's devices that has stock: the oldest one-time key
// package, consumed, or, when there is none or the hourly limits
// (Config.ClaimsPerClaimer, ClaimsPerDevice; defaults [ClaimsPerClaimer],
// [ClaimsPerDevice]) are reached, the device's
// last-resort key package, which stays; 200
// {"claims": [{"account_id", "claim_id", "device", "key_package",
// "last_resort"}]}, or
// 404 no_key_packages. Uploads and claims of one account take a lock on
// its stock (an advisory lock on PostgreSQL), so two claims never take the
// same key package and concurrent uploads never pass a cap. Each claim is
// recorded: GET /v1/keypackages answers the caller's stock per device and
// the claims not yet acknowledged (oldest first, at most 100), and DELETE
// /v1/keypackages/claims?through=<claim id> acknowledges them up to that
// one (204).
//
// Add-tokens. POST /v1/contacts/tokens {max_uses?, ttl_seconds?} → 201
// {id, token: "skt_add_…", max_uses, uses, expires_at, created_at} makes
// a token whose holder may claim the caller's key packages as if they
// shared a room (stored as its hash; at most [MaxAddTokens] live per
// account); GET /v1/contacts/tokens lists the caller's own without
// secrets; DELETE /v1/contacts/tokens/{id} revokes one (204).
//
// Welcome inbox. POST /v1/inbox {claim_id, welcome}, by the account that
// made the claim and is still in the channel, stores the Welcome for the
// claimed account, once per claim (409 already_delivered; the claim is
// marked by one conditional UPDATE); 201 {"id"}. It makes nobody a member:
// POST /v1/inbox/{id}/accept, by the person (their seat, once it joined
// from the Welcome), makes them a member of the entry's channel (a
// member_added event) and drops the entry; until then the entry's account
// may read the channel's ratchet tree, which the join needs. GET
// /v1/inbox?after=<cursor> answers the caller's entries {"id", "channel",
// "device", "from", "welcome", "at"}, oldest first, a page of at most 50
// entries and 4 MiB of Welcomes, with has_more and next (the cursor);
// DELETE /v1/inbox/{id} declines one (204; the sender learns nothing).
// One sender holds at most [MaxInboxPerSender] entries and
// [MaxInboxSenderBytes] in one inbox (429 quota_exceeded), an inbox at
// most [MaxInbox] entries and [MaxInboxBytes] (409 inbox_full), the
// defaults of Config.InboxPerSender, InboxSenderBytes, InboxEntries and
// InboxBytes:
// last-resort key packages can be claimed again and again, so without the
// caps a related account could fill another's inbox without bound.
//
// Storage budgets. Every blob a client has the directory keep (stock key
// packages, inbox Welcomes, join requests and their Welcomes, GroupInfos,
// tree parts) counts against its account's, its signup group's, its org's
// and the server's budget (Config.AccountBudget, GroupBudget, OrgBudget,
// ServerBudget), kept as one ledger changed in the row's own transaction;
// a put past any is 413 quota_exceeded naming the scope (budget.go).
//
// GroupInfo. PUT /v1/channels/groupinfo {channel, epoch, group_info} (at
// most 1,048,576 bytes, epoch at most 2^63-1), by the owner or a member,
// is taken only for the epoch the relay's commit fence has reached for the
// channel (Config.Fence): an earlier epoch is 409 stale_epoch, a later one
// 409 epoch_not_reached, each with the fence's epoch, so no member can
// park a GroupInfo at a far epoch and lock the others out. One GroupInfo
// is kept per channel, the latest put for the fence's epoch; the check
// against a racing put of a later epoch is in the upsert's own statement.
// A fence reset and the removal of the member who put it clear it. GET
// /v1/channels/groupinfo?channel=… answers {"epoch", "group_info"}, or 404
// not_found when none is kept.
//
// Trees. PUT /v1/channels/tree {channel, id, epoch, part, parts, data}
// keeps a ratchet tree (RFC 9420 §12.4.3.3) in up to 64 parts of at most
// 1 MiB, under the uploader's own id, for the fence's epoch or the next
// one (the tree a Welcome names goes up before its Commit): other epochs
// are 409 stale_epoch or epoch_not_reached as for GroupInfo. GroupInfo and
// tree bytes count against the putter's budget of [MaxTreeBytes] together
// (413 quota_exceeded). A joiner checks a fetched tree against the
// GroupContext's tree_hash, so the directory cannot change it unnoticed.
//
// Auto invites. POST /v1/channels/invites (and /v1/federation/invites)
// take "auto": true. A join with an auto invite is checked and counted as
// any other, and in the same transaction makes the joiner a member: 201
// {"request_id", "auto": true, "epoch", "group_info"} with the channel's
// GroupInfo, or without the last two when none was put. key_package is
// optional then. The request is recorded as completed with no Welcome, so
// the owner never sees it pending and the pending cap does not apply.
// With "token_hash" (standard base64 of a SHA-256) beside "auto": true the
// directory mints nothing: the owner's seat made the token, from a secret
// that also gives the invite's key in the room, and the directory keeps
// the hash as it keeps its own tokens', answering 201 {"expires_at"} (a
// hash already stored is 409 invite_exists). The join shows the token as
// any other. So nothing the directory holds signs for the invite: the
// room's members check its key, uses and lifetime themselves.
// Directory-minted auto tokens still join, but rooms no longer list their
// keys.
//
// The stock endpoints and GET and DELETE of the inbox take account-wide
// credentials only; a channel-scoped credential claims, delivers and
// reads or puts GroupInfos on its own channel only.
//
// # Limits
//
// Requests that create state or credentials are rate-limited with token
// buckets, one set per remote address and one per account (see [Limits]
// for the knobs and [DefaultLimits] for the values): sign-up (per address
// and per IPv4 /24 or IPv6 /64, whose accounts also share one storage
// budget on the relay), token minting, channel registration (POST /v1/channels and
// POST /v1/seats), invite creation (channel, federation and org invites
// together), device grants (creation per address only; approval and
// lookup), joins, changes to the channel feed (members added or
// removed, fence resets, inbox deliveries), key-package uploads and
// acknowledgements, key-package claims (30 a minute per account, since
// each drains someone else's stock), and GroupInfo puts. The address bucket is checked before the
// credential is even looked up. A refusal is 429 {"error":
// "rate_limited"} with a Retry-After header. Besides the rate, one address may hold at most 20
// pending device grants (Limits.OpenGrantsPerAddr): there is no global
// cap that one client could fill for everyone. Operator calls (the
// internal secret) are never limited.
//
// The remote address is the TCP peer's (IPv6 counted per /64). Behind a
// reverse proxy every client would share the proxy's address and so its
// buckets: set Config.TrustedProxies to the proxies' addresses (the client
// is then the rightmost X-Forwarded-For entry that is not a trusted
// proxy), and let clients reach the directory only through them. The limiters keep at most Limits.MaxKeys addresses or
// accounts each (10,000 by default, a few hundred bytes each) and forget
// a bucket once it is full again, so a flood of distinct addresses costs
// bounded memory. Limits.Off turns all of it off, for benchmarks.
//
// The directory stores the address (IPv4, or the IPv6 /64) a device grant
// came from, for the per-address cap; it goes with the grant when the
// sweep deletes it.
//
// # Reads
//
// Every GET that answers blobs or lists is bounded, and the long ones are
// paged with a cursor: an absent after is the first page, has_more says
// another follows and next is its cursor. The inbox pages at most 50
// entries and 4 MiB of Welcomes, pending join requests 50 (3.2 MiB of key
// packages), the stock's unacknowledged claims 100, a channel's members
// 500; a GroupInfo is at most 1 MiB, a tree part 1 MiB, a Welcome 256
// KiB, the add-tokens 100, and the relay's feed 1000 events a page.
//
// These reads (the inbox, pending requests, the Welcome poll, the stock,
// members, add-tokens, GroupInfo and tree parts) have token buckets of
// their own (Limits.Read, per address and per account), and run inside a
// read gate: at most Limits.ReadsPerAccount (4) reads of one account in
// flight, and on the whole server at most Limits.ReadBytes (128 MiB)
// counted as 4 MiB, the page bound, per read, so 32 reads, 8 accounts'
// worth, is the most the directory ever builds and writes at once. Each
// costs several times its page in memory (the rows, their base64, the
// JSON, and garbage not yet collected: the heap grew by at most about 35
// MiB per read of a 4 MiB page in flight in TestReadsConcurrentHeapBounded),
// which a crowd of accounts can no longer multiply. A read past either bound
// waits up to a second for a slot, then is 429 rate_limited with a
// Retry-After; the gate is not a rate, and Limits.Off leaves it on.
//
// # Lifetimes
//
// Join requests are garbage-collected by a background sweep (every 24 hours
// by default): completed requests 24 hours after completion, and pending
// requests 24 hours after creation (they are then expired). Inbox entries
// and key-package claims, acknowledged or not, are deleted 30 days after
// they were made (Config.InboxRetention); key packages in stock do not
// expire (their MLS lifetime is the seat's to manage). Device grants
// expire 10 minutes after creation; a credential not collected by then is
// destroyed.
//
// # PostgreSQL
//
// By default the directory keeps its state in one SQLite file
// (Config.DBPath), for a directory that runs as one process. Set
// Config.Backend to pgstore.Backend{} (package directory/pgstore) and
// Config.Database to a postgres:// or postgresql:// URL (any form
// github.com/jackc/pgx/v5 parses, for example
// postgres://skytale:secret@db.internal:5432/skytale?sslmode=verify-full)
// to keep it in PostgreSQL instead; this package itself links no
// PostgreSQL driver. Any number of directory processes may
// then share that database behind a load balancer, with the same JWT and
// internal secrets. Each process holds at most 16 connections.
//
// The schema is created and migrated at start-up: each migration runs in
// its own transaction and is recorded in schema_migrations, under an
// advisory lock, so processes starting together apply each migration
// once. A database migrated by a newer build is refused. The SQLite
// schema is not touched by any of this, and there is no conversion
// between the two: a directory moves from SQLite to PostgreSQL by
// starting afresh.
//
// Write transactions run at READ COMMITTED. Each check that guards a
// change is either part of the change's own statement (an invite's use
// is UPDATE … WHERE uses < max_uses, which a concurrent use waits for
// and then re-checks; orgs, channel names, seat identities, members and
// user codes are INSERT … ON CONFLICT DO NOTHING) or reads a row locked
// first (a join locks its channel, so the pending cap is counted one
// join at a time; an approval or a poll locks its device grant, so a
// grant is approved once and its credential delivered once), and the cap
// on open grants per address holds an advisory lock on the address, as
// do an account's key-package stock (its uploads and the claims on it)
// and its inbox (the cap on entries). A GroupInfo put is one upsert whose
// epoch check a concurrent put waits for and re-checks; an inbox delivery
// marks its claim with a conditional UPDATE. The
// channel feed and the revocation feed take their ids from a counter row
// updated in the writing transaction, which makes the feed's writers
// commit one at a time in id order: a relay polling with its cursor never
// sees an id before every lower one is visible. Deadlocks are retried.
// See docs/POSTGRES.md for operating it (backups included).
package directory
