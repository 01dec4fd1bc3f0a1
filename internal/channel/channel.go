// Package channel validates channel names and derives their MLS group ids.
//
// A channel name is exactly three non-empty parts, org/namespace/service, at
// most 256 bytes, of the characters [A-Za-z0-9_.-] separated by "/". Parts
// "." and ".." are refused so a name can never read as a path.
package channel

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest valid channel name, in bytes.
const MaxLen = 256

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid channel name")

// Valid reports why name is not a valid channel name, or nil.
func Valid(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalid)
	}
	if len(name) > MaxLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' || c == '/') {
			return fmt.Errorf("%w: only letters, digits and _ . - / are allowed", ErrInvalid)
		}
	}
	parts := strings.Split(name, "/")
	if len(parts) != 3 {
		return fmt.Errorf("%w: want org/namespace/service, got %d parts", ErrInvalid, len(parts))
	}
	for _, p := range parts {
		switch p {
		case "":
			return fmt.Errorf("%w: empty part", ErrInvalid)
		case ".", "..":
			return fmt.Errorf("%w: %q is not a valid part", ErrInvalid, p)
		}
	}
	return nil
}

// Split returns the three parts of a valid name.
func Split(name string) (org, ns, svc string) {
	org, rest, _ := strings.Cut(name, "/")
	ns, svc, _ = strings.Cut(rest, "/")
	return org, ns, svc
}

// GroupID is the MLS group id of a channel: SHA-256 of the name's bytes.
func GroupID(name string) [32]byte {
	return sha256.Sum256([]byte(name))
}
