package mls

// senderDataKeyNonce derives the key and nonce that protect a
// PrivateMessage's SenderData (§6.3.2) from the epoch's sender_data_secret
// and a sample of the content ciphertext: its first KDF.Nh bytes, or all of
// it when it is shorter.
func senderDataKeyNonce(s suite, senderDataSecret, ciphertext []byte) (key, nonce []byte) {
	sample := ciphertext
	if len(sample) > s.hashLen() {
		sample = sample[:s.hashLen()]
	}
	key = expandWithLabel(s, senderDataSecret, "key", sample, s.aeadKeyLen())
	nonce = expandWithLabel(s, senderDataSecret, "nonce", sample, s.aeadNonceLen())
	return key, nonce
}
