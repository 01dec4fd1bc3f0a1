// Package relay is the message plane: a zero-knowledge store-and-forward
// service for opaque MLS ciphertext.
//
// A [Server] is an [net/http.Handler]; mount it on any mux. It serves
//
//   - the WebSocket at /ws and /ws/{org}/{ns}/{svc}: JSON frames (auth
//     first, then subscribe, unsubscribe, publish; server push of every
//     message on a subscribed channel),
//   - GET /v1/messages (application entries) and GET /v1/sync (every entry)
//     for catch-up from the archive,
//   - GET /health.
//
// # Archive
//
// Every accepted publish is stored under a per-channel sequence number
// that starts at 1 and is never reused, not after eviction (each channel
// keeps ArchiveCap entries for ArchiveTTL) and not after a restart.
//
// A file-backed archive (Config.DBPath) is two parts, kept, backed up
// (BackupArchive) and restored together: an append-only log of segment
// files in the folder LogDir(DBPath), which holds the payloads and every
// change of a channel's sequence and fence, and the SQLite file, which
// indexes it. A logger goroutine appends many publishes (from many
// channels) to the log with one write and one fdatasync, and acknowledges
// them once that returns, so an acknowledged publish survives a crash of
// the process or of the machine. An indexer goroutine then writes their
// rows (channel, seq, type, ts, account, and where the payload is) in one
// SQLite transaction, which is not synced: the transaction records the
// log position it holds up to, and an open replays what the log holds
// after it, up to the first record a crash left torn. Reads wait for the
// index, so what was acknowledged can be read. Segments are written ahead
// (zeros, or the file of a removed segment) so that an append's flush has
// no metadata to commit; a segment goes once no row points into it, and a
// compactor moves the few entries left in nearly empty old segments, so
// the log stays within twice what the archive stores. An archive written
// before the log had its payloads in the rows: they are served from there
// and moved into the log in the background, the same way. An archive in
// memory keeps the payloads in the rows, one transaction per batch.
//
// On Linux the indexer (or the committer of an archive in memory) runs on
// a thread of its own, 10 steps nicer than the process, so that on a busy
// CPU its transactions give way to the readers and writers that live
// delivery waits for.
//
// Live delivery of application messages does not wait for the fsync: a
// sequencer stage assigns the seq and pushes the message at once. A crash
// may therefore lose a message that subscribers saw but the publisher was
// never told was stored; it can never make the relay hand out a seq again
// (numbers are reserved durably in blocks ahead of use, so a crash leaves
// at most a gap). Commits and Welcomes, and anything published after them
// on their channel, are pushed only once durable, so subscribers never act
// on a group change the relay could forget.
//
// Seqs are strictly increasing per channel but not contiguous: a crash may
// skip some. The cap counts entries (ArchiveCap application entries and as
// many handshake entries per channel), never a distance in seqs, so a gap
// hides or evicts nothing.
//
// # Catching up
//
// A client that was away subscribes first, waits for the subscription's
// ok, then pages through GET /v1/sync from the last seq it has, and drops
// pushes it already has by seq. Nothing falls between the two: a read
// first waits for the commit of everything the relay pushed before the read
// began. Pages are bounded in bytes as well as in entries (MaxPageBytes,
// default 4 MiB; a page cut by bytes has has_more set, and a page always
// carries at least one entry) and are streamed from the archive, never
// built whole in memory.
//
// A page also says "oldest_seq", the oldest seq the log still holds (0 for
// none), and "truncated", true when an entry of the log after since_seq is
// gone (the cap or the TTL dropped it, or it is past the TTL): the client
// has missed entries and must recover another way. The archive keeps per
// channel a drop floor for each log, the highest seq it dropped from it,
// and truncated is since_seq < floor (or a stored entry after since_seq is
// hidden); it never compares seqs with each other, since gaps are not
// losses. SQLite keeps the floors on disk, in the transaction of the
// delete. A JetStream node learns drops as it follows the stream; after a
// restart it counts a log the stream holds full as cut below its oldest
// entry, and does not know what the TTL removed while it was down.
//
// # Entry types and commit fencing
//
// The relay reads only the cleartext MLSMessage header (RFC 9420 §6): a
// commit or proposal is entry type 1, a Welcome type 2, anything else 0.
// Per channel it remembers the epoch it expects the next commit for; a
// commit for any other epoch is refused with a stale_epoch error and is
// neither archived nor delivered. The first commit on a channel may set
// the expected epoch only up to MaxFirstEpoch (default 2^32), and no
// commit may carry epoch 2^64-1: both are refused with
// {"type":"error","code":"epoch_out_of_range","max_epoch":…}. A room's
// owner recovers a channel whose fence a member jammed through the
// directory (POST /v1/channels/fence), which reaches the relay as a
// fence_reset event of the channel feed. The directory reads the fence
// back (Server.NextEpoch in-process, GET /v1/internal/fence with
// Config.InternalSecret otherwise) to keep a channel's GroupInfo only for
// the epoch the fence has reached.
//
// # Members
//
// Only a channel's members may publish to it, and by default only members
// may subscribe to it or read it (OpenReads keeps reads open to every
// authenticated account, leaving the MLS group as the only gate;
// OpenChannels turns the gate off for an application that gates channels
// itself). The relay learns members from Config.Members: the
// directory in process, [NewHTTPMembers] for a directory elsewhere, or a
// [MemberSet] an embedding application fills itself. It polls every
// MembersPoll and at once when an account it does not know asks, so a new
// member is served without waiting. Refusals are
// {"type":"error","code":"not_a_member","channel":…,"message":…} on the
// socket and 403 {"error":"not_a_member"} on the catch-up endpoints. When a
// member is removed, its live subscriptions to the channel end with that
// frame; its socket stays open for its other channels. A channel-scoped
// token (with a chan claim) acts on its channel only, as its account.
//
// # Coalesced pushes
//
// A client that sends {"type":"auth","token":…,"batch":true} as its first
// auth frame gets the frames queued for its socket (pushes, acks, replies)
// packed into one WebSocket text message each time the socket's writer
// wakes, the frames separated by "\n" and each byte for byte what it would
// be alone, up to maxBatchBytes (64 KiB) per message; a larger frame goes
// alone. The writer never waits to fill a batch, so batching only merges
// what is queued already. batch in a later auth frame changes nothing.
// Other clients get one frame per message as before.
//
// # Tokens on long-lived sockets
//
// Tokens live at most 300 s (exp − iat). A socket sends a fresh
// {"type":"auth","token":…} frame for the same account and scope before
// its token expires and gets {"type":"ok","message":"reauthenticated"};
// otherwise it is closed at exp with a token_expired error frame and close
// status 1008.
//
// # Bounds
//
// Every resource a client can make the relay hold is bounded: a socket may
// send PreAuthReadLimit bytes (4 KiB) before it authenticates and one
// 1 MiB payload per frame after (MLS handshakes up to 16 MiB, see Large
// handshakes); the relay holds MaxConns (4096) sockets, of which
// MaxUnauthConns (1024) are a login reserve only sockets not yet
// authenticated may hold; a client address may hold MaxConnsPerAddr (256)
// sockets and MaxUnauthConnsPerAddr (32) in their login, its network (an
// IPv4 /24, an IPv6 /64) MaxConnsPerNet (1024) and MaxUnauthConnsPerNet
// (128) (429 rate_limited with Retry-After before the upgrade); a full
// reserve closes the socket silent longest in its login, and a login past
// the authenticated share closes the authenticated socket idle longest
// (close 1013, "busy" and "evicted": reconnect later); a socket that does
// not answer a ping within PingTimeout (15 s) is closed. Behind a reverse
// proxy, Config.TrustedProxies makes the client address the forwarded
// one. An account may hold
// MaxConnsPerAccount (64) sockets (too_many_connections, close 1013); a
// socket's queue holds at most SendQueue frames and MaxQueueBytes (16 MiB);
// an account may have AccountQuota bytes (256 MiB) of payload stored across
// all channels, and its org, its signup group (the accounts the directory
// made from one IPv4 /24 or IPv6 /64: the token's grp claim) and the whole
// relay OrgBudget, GroupBudget and ServerBudget (defaults fitted to the
// disk; budget.go), each refused with quota_exceeded naming its "scope".
// Frames with a repeated key or a key in the
// wrong case are refused (bad_frame).
//
// # Large handshakes
//
// An MLS commit whose UpdatePath encrypts to blank subtrees grows with the
// group: in the X-Wing suite (0x004D) it passes 1 MiB at about 885 members
// and is 11.7 MB at 10,000. A payload whose cleartext header makes it a
// commit, a proposal or a Welcome may therefore be up to
// MaxHandshakePayload (16 MiB) decoded; everything else keeps MaxPayload
// (1 MiB), and a larger frame that is not a handshake still closes the
// socket with status 1009. A handshake over 16 MiB is refused with
// payload_too_large.
//
// Memory stays bounded however many clients send large frames. A socket's
// frame is read into memory up to the 1 MiB limit; only when that prefix
// is a flat publish frame whose payload starts with a handshake header is
// it read on, and only once it holds a share of the relay-wide
// LargeFrameBudget (default 128 MiB) sized for the largest frame and its
// decoded payload (about 39 MiB: three such frames at once by default). A
// socket that waits LargeFrameWait (5 s) for the budget reads the rest of
// the frame without keeping it and gets
// {"type":"error","code":"busy",…}; its socket stays open, and no other
// socket waits for it. A socket holding the budget that takes longer than
// LargeFrameTimeout (2 minutes) to send the rest is closed, so trickling
// clients cannot keep it from others. The frame's buffer becomes the push
// frame (the
// payload's base64 is not copied again), which every subscriber's queue
// shares. A socket's queue holds MaxQueueBytes of other frames plus one
// largest handshake, so a large commit does not drop a healthy subscriber
// as slow, while one that reads nothing is still dropped.
//
// # Slow consumers
//
// Each connection has a bounded send queue. A connection whose queue fills
// is closed (status 1013) instead of slowing down the publisher or the
// other subscribers.
//
// # Cluster on NATS JetStream
//
// With Config.NATSURL set, the archive is a NATS JetStream stream instead
// of SQLite, and every relay given the same NATS and Config.NATSStream is
// a node of one cluster (docs/CLUSTER.md has the operator's view). The
// guarantees above hold across the nodes:
//
//   - A channel has two subjects in the stream, <stream>.a.<token> for
//     application entries and <stream>.h.<token> for handshake entries,
//     the token being the channel name in unpadded base64url. The stream's
//     MaxMsgsPerSubject is ArchiveCap, so the two caps stay apart, and its
//     MaxAge is ArchiveTTL.
//   - A channel's seq is the entry's stream sequence: strictly increasing
//     on every channel, never reused, not contiguous (other channels'
//     entries take the numbers between), the same on every node.
//   - A publish is acknowledged once JetStream acknowledged it. Every
//     node consumes the whole stream (an ordered consumer) and pushes each
//     entry to its own subscribers, whichever node took the publish; the
//     publisher's own socket is skipped. An entry is pushed only once it
//     is stored, so a catch-up read that starts after a push finds it.
//   - The commit fence is one compare-and-set: each handshake message
//     carries the epoch expected after it, and is published with
//     Nats-Expected-Last-Subject-Sequence on the channel's handshake
//     subject, so two nodes can never both accept a commit for one epoch;
//     the loser re-reads the subject and answers stale_epoch (or stores a
//     proposal or Welcome after the winner). Handshake messages carry
//     Nats-TTL: never, so the newest, which holds the fence, outlives
//     MaxAge; the relay hides the older ones past the TTL and deletes them.
//     A fence reset is a marker on the same subject carrying the feed
//     event's id: every node follows the directory's feed, and the reset
//     takes effect once, never again after the group committed past it.
//   - GET /v1/messages and /v1/sync read through a short-lived consumer on
//     the stream leader, in rounds of at most one page's bytes.
//   - Quotas and budgets: each node mirrors, from the stream, the payer
//     (account, org, group) and size of the entries within the caps and
//     the TTL (it replays the stream's headers at start) and adds the
//     publishes it has in flight. Nodes admit concurrent publishes each
//     against their own view, so the cluster may pass a budget by what is
//     in flight at once.
//   - Members and revocations come from the directory's feeds, polled by
//     each node, and DBPath (in memory when empty) keeps what a node
//     learned of them.
//
// Acknowledged means stored by JetStream: run nats-server with sync_interval
// always, or the stream at three replicas, for it to mean synced to disk
// (or on a majority of servers). The NATS servers' max_payload must be at
// least 1 MiB plus headers (2MB); New checks. Handshakes are capped at what
// the servers admit, MaxHandshakePayload with max_payload 17MB, and a larger
// one is refused to its publisher with payload_too_large naming the cap.
// The relay does not require 17MB at start: a cluster of rooms that never
// pass about 900 members in the post-quantum suite (or 10,000 in the
// classic one, whose commits stay under 1 MiB) keeps working on the 2MB
// servers it ran on before, and the refusal says what to raise.
//
// # Benchmarks
//
// bench_test.go measures the relay over real WebSockets on loopback, with
// client and relay in one process sharing the machine's cores: live
// fan-out to 100 subscribers, publish-to-deliver latency, durable publish
// throughput (16 publishers, and one publish in flight), catch-up pages and
// memory per idle connection:
//
//	go test -run '^$' -bench . -benchtime 3s ./relay
//
// bench_cluster_test.go measures the JetStream archive the same way, one
// node against three on one nats-server in the process.
package relay
