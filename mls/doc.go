// Package mls implements the Messaging Layer Security protocol, RFC 9420:
// groups whose members share a secret that moves forward with every
// Commit, so that a removed member reads nothing after its removal and a
// stolen key reads nothing before it.
//
// It is the project's own engine, built on the Go standard library
// (crypto/hpke, crypto/ed25519, crypto/ecdh, crypto/ecdsa, crypto/mlkem)
// with golang.org/x/crypto only for ChaCha20-Poly1305, with no I/O and no
// logging, and it imports nothing else of the module: the seat drives it,
// and any other client may. Its suites ([SupportedSuites]) are the RFC's
// but the two over X448 and Ed448, and a post-quantum one,
// [MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519], whose HPKE runs over
// X-Wing (ML-KEM-768 with X25519).
//
// Nothing from outside a group, and no member's Commit, acts on it without
// the application's say: [Config.ExternalPolicy], [Config.CommitPolicy] and
// [Config.ValidateCredential] see every such message and credential, and
// since every member runs them, a rule holds even against a member whose
// software does not.
//
// # Notes for reviewers
//
// The goals of this package, in order, are security, correctness,
// simplicity and reviewability. It follows the structure of RFC 9420
// closely: one file per concept of the RFC, names that follow the RFC (in
// Go case), and every function that implements a part of the protocol
// cites the section it comes from, so the code can be checked against the
// text side by side. Decoding is strict and never panics on untrusted
// input, and a decoded value re-encodes to the same bytes.
//
// docs/ARCHITECTURE.md maps each section of the RFC to its file ("RFC 9420
// in mls/") and states what the engine guarantees ("The engine's rules":
// decoding, the suites, secrets, policies, proposals and Commits,
// credentials, received keys, saved state).
package mls
