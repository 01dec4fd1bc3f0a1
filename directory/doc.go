// Package directory implements the Skytale directory: the HTTP API that
// holds accounts and API keys, mints the short-lived JWTs both planes
// accept, registers channels and records their members, brokers the MLS
// join handshake (invites, join requests, each device's stock of key
// packages, a Welcome inbox, each channel's latest GroupInfo and ratchet
// tree), runs the device-grant flow, registers seats, and records
// revocations. The relay follows its channel feed and its revocations to
// take traffic only from members who are not revoked.
//
// The directory is a broker the rooms need not trust. It never parses MLS
// bytes: key packages, Welcomes, GroupInfos and trees cross it as opaque
// blobs, and the members check what they fetch (a tree against the signed
// tree_hash, a joiner's identity by its MLS credential, an auto invite's
// key, uses and lifetime in the room itself). It stores secrets only as SHA-256
// hashes, and a device's new credential only HPKE-sealed to that device.
// What a stranger or a crowd can make it hold or do is bounded where the
// request arrives: rates per address and per account ([Limits],
// [DefaultLimits]), bounded and paged reads behind a gate, and four
// storage budgets per byte kept.
//
// [New] returns a [Server], an [http.Handler] that does not listen on its
// own: mount it on any mux. [Server.Close] stops the background sweep and
// closes the database. The Server does not bound the connections that
// reach it: an embedder serving it to the network sets http.Server's
// timeouts, caps connections in total and per client address, serves
// GET /health from a listener of its own if monitors must reach it under a
// flood, and sets Config.TrustedProxies behind a reverse proxy, as
// tally serve does (README.md, "Self-hosting").
//
// Its state is one store written once in SQL that SQLite (Config.DBPath,
// one process) and PostgreSQL (Config.Database with Config.Backend set to
// pgstore.Backend{} of package directory/pgstore, any number of processes;
// this package itself links no PostgreSQL driver) both speak, every change one transaction whose checks either sit in the
// change's own statement or read a row it locked first, so concurrent
// requests never over-use an invite or pass a cap.
//
// The wire surface (every route, field, limit and error code) is in
// docs/API.md; how the directory fits with the relay and the seat, and how
// to add a storage backend, in docs/ARCHITECTURE.md; running it on
// PostgreSQL in docs/POSTGRES.md; what the servers learn in
// docs/SECURITY.md.
package directory
