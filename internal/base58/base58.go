// Package base58 implements the base58btc encoding (the Bitcoin alphabet)
// used by multibase 'z' strings such as did:key identifiers.
//
// Each leading zero byte encodes as a leading '1'; the rest is the big-endian
// number written in base 58. The conversion is quadratic in the input length,
// which is fine for keys and identifiers; [Decode] refuses inputs longer than
// [MaxDecodeLen] so untrusted strings cannot demand unbounded work.
package base58

import "errors"

const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// MaxDecodeLen is the longest string [Decode] accepts.
const MaxDecodeLen = 1024

var (
	errLong = errors.New("base58: input too long")
	errChar = errors.New("base58: invalid character")
)

var index = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = int8(i)
	}
	return t
}()

// Encode returns the base58btc encoding of b.
func Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// log(256)/log(58) < 1.37, so this many digits always suffice.
	digits := make([]byte, 0, (len(b)-zeros)*137/100+1)
	for _, c := range b[zeros:] {
		carry := int(c)
		for i := range digits {
			carry += int(digits[i]) << 8
			digits[i] = byte(carry % 58)
			carry /= 58
		}
		for carry > 0 {
			digits = append(digits, byte(carry%58))
			carry /= 58
		}
	}
	out := make([]byte, zeros+len(digits))
	for i := range zeros {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = alphabet[d]
	}
	return string(out)
}

// Decode returns the bytes encoded by the base58btc string s.
func Decode(s string) ([]byte, error) {
	if len(s) > MaxDecodeLen {
		return nil, errLong
	}
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	// Little-endian base-256 digits of the number.
	num := make([]byte, 0, (len(s)-zeros)*733/1000+1)
	for i := zeros; i < len(s); i++ {
		v := index[s[i]]
		if v < 0 {
			return nil, errChar
		}
		carry := int(v)
		for j := range num {
			carry += int(num[j]) * 58
			num[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			num = append(num, byte(carry))
			carry >>= 8
		}
	}
	out := make([]byte, zeros+len(num))
	for i, c := range num {
		out[len(out)-1-i] = c
	}
	return out, nil
}
