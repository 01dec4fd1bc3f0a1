// Package mls implements the Messaging Layer Security protocol, RFC 9420.
//
// # Notes for reviewers
//
// The goals of this package, in order, are security, correctness, simplicity
// and reviewability. It follows the structure of RFC 9420 closely: there is
// one file per concept of the RFC, names follow the RFC (in Go case), and
// every function that implements a part of the protocol cites the section
// it comes from, so the code can be checked against the text side by side.
//
// Wire structures use the TLS presentation language of RFC 9420, Section 2.1,
// and are decoded strictly: variable-length integers must use their minimal
// encoding, every length is capped before any allocation (see
// [maxVectorLen]), and trailing bytes are an error. Decoding never panics
// on untrusted input, and a successfully decoded value re-encodes to the
// same bytes.
//
// The cipher suites are a closed set built on the Go standard library
// (crypto/hpke, crypto/ed25519, crypto/ecdsa, crypto/aes) and, for
// ChaCha20-Poly1305, golang.org/x/crypto. Suites 4 and 6 (X448 and Ed448)
// are not implemented.
//
// Secrets, MACs and tags are compared in constant time with
// [crypto/hmac.Equal] or [crypto/subtle]. Nothing in this package logs.
package mls
