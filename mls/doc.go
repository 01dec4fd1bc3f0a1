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
// ChaCha20-Poly1305, golang.org/x/crypto; [SupportedSuites] lists them.
// Suites 4 and 6 (X448 and Ed448) are not implemented.
//
// # Post-quantum suite
//
// [MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519] (0x004D) protects a
// group's secrets against an adversary who records ciphertext today and
// has a quantum computer later: every HPKE use (UpdatePath, Welcome,
// external init and external_pub) runs over X-Wing, the hybrid of
// ML-KEM-768 and X25519 (crypto/hpke MLKEM768X25519, HPKE KEM 0x647A),
// which holds while either half does. Signatures remain Ed25519, so
// authentication is not post-quantum. The code point 0x004D is not in the
// IANA registry yet: it is the one OpenMLS uses for this suite, and it
// may change when the registration is made. Node key pairs derive from a
// secret as the X-Wing specification fixes (the private key is
// SHAKE256(secret, 32)), as OpenMLS and ts-mls derive X-Wing key pairs.
//
// Keys and ciphertexts are larger: a 1,216-byte public key per leaf and
// per KeyPackage init_key, a 1,120-byte kem_output per encrypted path
// secret and per Welcome recipient. A KeyPackage is about 2.7 KB; a
// ratchet tree costs about 1.4 KB per member, and up to 2.7 KB once every
// parent node is set, so a Welcome that carries it in band ([TreeInBand])
// grows by as much per member: applications that cap Welcome sizes should
// send the tree out of band ([TreeOutOfBand], and the RatchetTree of
// [JoinOptions]). A Commit whose path encrypts to blank subtrees carries
// one 1,120-byte kem_output per member of those subtrees.
//
// Secrets, MACs and tags are compared in constant time with
// [crypto/hmac.Equal] or [crypto/subtle]. Nothing in this package logs.
//
// # Messages from outside the group
//
// Nothing from outside a group acts on it unless the application says so.
// Proposals from new_member_proposal and external senders, and external
// Commits, go to [Config.ExternalPolicy] once they have passed the checks
// of RFC 9420; without a policy they are all refused with
// [ErrRefusedByPolicy], and a refused message changes nothing.
//
// # Members' Commits
//
// What members may change is the application's to decide (Sections
// 12.1.7, 12.2 and 12.4.2): [Config.CommitPolicy] sees every Commit of a
// member, the ones this member creates before they are built and the
// ones it receives before they are applied. A refused own Commit fails
// with [ErrRefusedByPolicy]; a refused pending proposal is left out of
// the Commit; a refused received Commit changes nothing. A member's
// proposal is checked too, when it is sent and when it is received, so a
// refused one is never cached. Since every member runs the policy, a rule
// holds even against a member whose software does not apply it.
//
// # Proposals and Commits
//
// Proposals are checked on their own when they arrive (Section 12.1) and
// cached for the epoch; [Group.PendingProposals] lists them and
// [Group.DiscardProposals] drops them. Until a Commit ends the epoch,
// [Group.Protect] refuses to send, with [ErrPendingProposals] (Section
// 12.4). A member can always commit: [Group.Commit] includes the pending
// proposals that are valid and fit together with those it asks for, in
// the order of preference of Section 12.2, and leaves out the rest,
// listing them with the reason in [CommitResult.Dropped]. So no proposal
// a peer can send stops a member from committing, and from sending after.
// [CommitOptions] also chooses, per Commit, between PublicMessage and
// PrivateMessage and whether the Welcome carries the ratchet tree; the
// defaults are the group's [Config.PublicHandshake] and
// [Config.OutOfBandTree].
//
// # Credentials
//
// One credential, one leaf, for life: an Add of a credential already in
// the group (compared by its whole encoding) is refused unless the same
// Commit removes the leaf that holds it, and an Update, an UpdatePath or a
// resync external Commit must keep the leaf's credential unless
// [Config.ValidateSuccessor] allows the new one. [Config.ValidateCredential]
// is the Authentication Service of Section 5.3.1: it sees every credential
// that enters the group, with its leaf's signature key. Refusals carry
// [ErrInvalidCredential].
//
// # Received keys
//
// Every public key a peer sends is checked for the group's cipher suite
// before it is stored (Section 5.1.1): X25519 keys of small order,
// P-256, P-384 or P-521 points off the curve, and X-Wing keys of the
// wrong length, failing the ML-KEM-768 encapsulation key check or with
// an X25519 part of small order are refused, as are Ed25519
// keys of the wrong length and ECDSA keys off the curve; so are extension
// lists that repeat a type (Section 13.4). This covers KeyPackages, the
// leaves of Updates and UpdatePaths, the node keys and kem_outputs of
// UpdatePaths, the ratchet tree of a Welcome, and the keys of external
// joins. A key that cannot be used would otherwise make every later
// Commit of every member fail.
//
// # Deleting secrets
//
// Secrets are zeroed once consumed (Section 9.2): ratchet keys once used,
// skipped keys beyond [Config.MaxRetainedKeys], the private keys of tree
// nodes that a Commit replaces, and everything a lookup derived for a
// PrivateMessage that then fails, which leaves the group state exactly as
// it was. Past epochs kept for late application messages
// ([Config.MaxPastEpochs]) keep only their application ratchets and
// sender data secret.
//
// # Saved state
//
// [Group.MarshalBinary] writes the whole state, secrets included, with a
// CRC-32C that catches accidental corruption. [RestoreGroup] treats the
// state as untrusted input: every length, index, count and width is
// checked, and the parts must agree with each other, before anything is
// used; a state it accepts re-encodes to the same bytes.
package mls
