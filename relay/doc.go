// Package relay is the message plane: a zero-knowledge store-and-forward
// service for opaque MLS ciphertext.
//
// A [Server] is an [net/http.Handler] (mount it on any mux) serving the
// WebSocket at /ws and /ws/{org}/{ns}/{svc}, the catch-up reads GET
// /v1/messages and GET /v1/sync, and GET /health and /ready. Every
// accepted publish is archived under a per-channel sequence number that
// starts at 1 and is never reused; an acknowledged publish survives a
// crash; commits are fenced by epoch; only a channel's members may use it;
// every resource a client can make the relay hold is bounded.
//
// The archive is SQLite with a segment log (Config.DBPath, in memory when
// empty) or, with Config.Archive set by package relay/jsarchive, a NATS
// JetStream stream that several relays share as one cluster. The NATS
// client comes only with relay/jsarchive and Prometheus only with
// relay/relaymetrics, so a relay embedded without them links neither.
//
// docs/RELAY.md is the manual (the frames, the archive's guarantees,
// catching up, fencing, members, bounds, large handshakes, the cluster);
// docs/ARCHITECTURE.md says how the package's files divide the work and
// how to add an archive backend; docs/CLUSTER.md is the operator's view of
// a cluster.
package relay
