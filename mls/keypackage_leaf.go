package mls

// KeyPackageLeaf parses a KeyPackage (RFC 9420 §10), given as an MLSMessage
// or bare, checks its signature and its leaf node's signature with the
// leaf's own signature key (§10.1), and returns the leaf's credential and
// signature key. It is for an application that must know whom a
// KeyPackage names before it adds it (its Authentication Service, §5.3.1,
// asked about the credential); the full validation still happens when the
// KeyPackage is added (§12.2).
func KeyPackageLeaf(data []byte) (cred Credential, signatureKey []byte, err error) {
	kp, err := parseKeyPackage(data)
	if err != nil {
		return Credential{}, nil, err
	}
	s, err := suiteFor(kp.CipherSuite)
	if err != nil {
		return Credential{}, nil, err
	}
	if err := kp.verifySignatures(s); err != nil {
		return Credential{}, nil, err
	}
	return cloneCredential(&kp.LeafNode.Credential), append([]byte(nil), kp.LeafNode.SignatureKey...), nil
}
