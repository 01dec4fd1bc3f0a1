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
// Every accepted publish is stored in SQLite under a per-channel sequence
// number that starts at 1 and is never reused, not after eviction (each
// channel keeps ArchiveCap entries for ArchiveTTL) and not after a restart.
// One committer goroutine writes many publishes (from many channels) per
// transaction, fsync'd; a publish is acknowledged only once its transaction
// is durable, so an acknowledged publish survives a crash of the process.
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
// # Entry types and commit fencing
//
// The relay reads only the cleartext MLSMessage header (RFC 9420 §6): a
// commit or proposal is entry type 1, a Welcome type 2, anything else 0.
// Per channel it remembers the epoch it expects the next commit for; a
// commit for any other epoch is refused with a stale_epoch error and is
// neither archived nor delivered.
//
// # Slow consumers
//
// Each connection has a bounded send queue. A connection whose queue fills
// is closed (status 1013) instead of slowing down the publisher or the
// other subscribers.
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
package relay
