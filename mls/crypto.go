package mls

// This file holds the labelled cryptographic operations of RFC 9420,
// Section 5. Every label is prefixed with "MLS 1.0 " as the RFC requires,
// which separates MLS uses of a key from any other protocol's.

const labelPrefix = "MLS 1.0 "

// expandWithLabel is ExpandWithLabel (Section 5.1):
//
//	struct {
//	    uint16 length;
//	    opaque label<V> = "MLS 1.0 " + Label;
//	    opaque context<V>;
//	} KDFLabel;
func expandWithLabel(s suite, secret []byte, label string, context []byte, length int) []byte {
	if length < 0 || length > 0xffff {
		panic("mls: internal error: ExpandWithLabel length out of range")
	}
	var b builder
	b.u16(uint16(length))
	b.vec([]byte(labelPrefix + label))
	b.vec(context)
	return s.expand(secret, b.bytes(), length)
}

// deriveSecret is DeriveSecret (Section 5.1): ExpandWithLabel with an
// empty context and the hash length Nh.
func deriveSecret(s suite, secret []byte, label string) []byte {
	return expandWithLabel(s, secret, label, nil, s.hashLen())
}

// deriveTreeSecret is DeriveTreeSecret (Section 9): ExpandWithLabel with
// the generation as a uint32 context.
func deriveTreeSecret(s suite, secret []byte, label string, generation uint32, length int) []byte {
	var b builder
	b.u32(generation)
	return expandWithLabel(s, secret, label, b.bytes(), length)
}

// signContent is the SignContent structure of Section 5.1.2.
func signContent(label string, content []byte) []byte {
	var b builder
	b.vec([]byte(labelPrefix + label))
	b.vec(content)
	return b.bytes()
}

// signWithLabel is SignWithLabel (Section 5.1.2).
func signWithLabel(s suite, priv []byte, label string, content []byte) ([]byte, error) {
	return s.sign(priv, signContent(label, content))
}

// verifyWithLabel is VerifyWithLabel (Section 5.1.2).
func verifyWithLabel(s suite, pub []byte, label string, content, sig []byte) bool {
	return s.verify(pub, signContent(label, content), sig)
}

// encryptContext is the EncryptContext structure of Section 5.1.3, used as
// the HPKE info.
func encryptContext(label string, context []byte) []byte {
	var b builder
	b.vec([]byte(labelPrefix + label))
	b.vec(context)
	return b.bytes()
}

// encryptWithLabel is EncryptWithLabel (Section 5.1.3): HPKE SealBase with
// EncryptContext as info and an empty aad.
func encryptWithLabel(s suite, pub []byte, label string, context, pt []byte) (kemOutput, ct []byte, err error) {
	return s.hpkeSeal(pub, encryptContext(label, context), nil, pt)
}

// decryptWithLabel is DecryptWithLabel (Section 5.1.3).
func decryptWithLabel(s suite, priv []byte, label string, context, kemOutput, ct []byte) ([]byte, error) {
	return s.hpkeOpen(priv, kemOutput, encryptContext(label, context), nil, ct)
}

// refHash is RefHash (Section 5.2). Unlike the other labelled operations
// the label is used as given; callers pass the full "MLS 1.0 ..." label.
//
//	struct {
//	    opaque label<V>;
//	    opaque value<V>;
//	} RefHashInput;
func refHash(s suite, label string, value []byte) []byte {
	var b builder
	b.vec([]byte(label))
	b.vec(value)
	return s.hash(b.bytes())
}

// makeKeyPackageRef is MakeKeyPackageRef (Section 5.2).
func makeKeyPackageRef(s suite, keyPackageBytes []byte) []byte {
	return refHash(s, "MLS 1.0 KeyPackage Reference", keyPackageBytes)
}

// makeProposalRef is MakeProposalRef (Section 5.2), over the encoded
// AuthenticatedContent.
func makeProposalRef(s suite, authenticatedContentBytes []byte) []byte {
	return refHash(s, "MLS 1.0 Proposal Reference", authenticatedContentBytes)
}
