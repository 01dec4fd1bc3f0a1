// Package seat is the client side of skytale: the keys a person holds, and
// the sealed batches in which their log travels through the relay.
//
// # Keys
//
// Everything long-term derives from one 24-word BIP-39 recovery phrase
// ([NewPhrase], [ParsePhrase]). The phrase gives a 64-byte BIP-39 seed
// ([Phrase.Seed]), and each key is HKDF-SHA256 of that seed under its own
// label, so that no two purposes ever share key material:
//
//   - [Seed.SyncKey]: the AES-256-GCM key of the seat's own sync channel.
//   - [Seed.Identity]: the Ed25519 signing key whose public half, written as
//     a did:key ([DIDKey]), names the seat in the directory and in MLS.
//
// Device keys are random per device and do not derive from the seed. The
// types that hold secrets ([Phrase], [Seed], [SyncKey], [Identity]) print as
// "REDACTED" under every fmt verb, so a stray log line cannot leak them;
// [Phrase.Words] is the one deliberate way to reveal the phrase.
//
// # Sealed batches
//
// Log entries cross the relay as sealed batches ([SyncKey.Seal],
// [SyncKey.Open]): a magic prefix, then AES-256-GCM with a random nonce over
// a padded encoding of the entries, with the channel name bound in as
// associated data. The relay stores only these opaque bytes; their sizes are
// the padding package's buckets. A cover batch ([SyncKey.SealCover]) has the
// same outer shape and opens to [Batch.Cover], so receivers drop it after
// decryption and the relay cannot tell it from a real batch.
package seat
