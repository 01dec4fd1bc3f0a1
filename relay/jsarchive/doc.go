// Package jsarchive keeps a relay's archive in a NATS JetStream stream
// that several relays share, so that they serve one cluster:
//
//	r, err := relay.New(ctx, relay.Config{…, Archive: jsarchive.New(jsarchive.Config{URL: "nats://…"})})
//
// It is the only part of the relay that links the NATS client, so a
// program that embeds a relay on SQLite (or only a seat, or the
// in-process test stack) links none. docs/CLUSTER.md describes running a
// cluster.
package jsarchive
