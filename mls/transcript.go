package mls

import "errors"

// This file computes the transcript hashes of RFC 9420 §8.2. Both start as
// the empty string in epoch 0 and are updated by every Commit:
//
//	confirmed_transcript_hash_[epoch] =
//	    Hash(interim_transcript_hash_[epoch - 1] ||
//	         ConfirmedTranscriptHashInput_[epoch])
//	interim_transcript_hash_[epoch] =
//	    Hash(confirmed_transcript_hash_[epoch] ||
//	         InterimTranscriptHashInput_[epoch])

// confirmedTranscriptHash returns the confirmed transcript hash of the epoch
// that the Commit in ac creates, from the interim transcript hash of the
// epoch it was sent in. The hash covers the wire format, the FramedContent
// and the signature, but not the confirmation tag, which is computed from it.
//
//	struct {
//	    WireFormat wire_format;
//	    FramedContent content; /* with content_type == commit */
//	    opaque signature<V>;
//	} ConfirmedTranscriptHashInput;
func confirmedTranscriptHash(s suite, interimBefore []byte, ac *authenticatedContent) ([]byte, error) {
	if ac.Content.ContentType != ContentTypeCommit {
		return nil, errors.New("mls: transcript hash input is not a commit")
	}
	b := builder{b: make([]byte, 0, len(interimBefore)+ac.Content.encodedLen()+len(ac.Auth.Signature)+8)}
	b.raw(interimBefore)
	b.u16(uint16(ac.WireFormat))
	ac.Content.marshal(&b)
	b.vec(ac.Auth.Signature)
	return s.hash(b.bytes()), nil
}

// interimTranscriptHash returns the interim transcript hash from an epoch's
// confirmed transcript hash and the confirmation tag of the Commit that
// created it (or of the GroupInfo, for a new member).
//
//	struct {
//	    MAC confirmation_tag;
//	} InterimTranscriptHashInput;
func interimTranscriptHash(s suite, confirmed, confirmationTag []byte) []byte {
	var b builder
	b.raw(confirmed)
	b.vec(confirmationTag)
	return s.hash(b.bytes())
}
