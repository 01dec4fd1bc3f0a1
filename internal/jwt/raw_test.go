package jwt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

func hs256(key []byte, claims string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	signing := b64([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64([]byte(claims))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signing))
	return signing + "." + b64(m.Sum(nil))
}
