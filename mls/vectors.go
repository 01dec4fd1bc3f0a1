package mls

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/skytale-oss/skytale/mls/internal/vectors"
)

// This file holds the checkers of the IETF MLS test vectors
// (https://github.com/mlswg/mls-implementations, test-vectors.md), one per
// vector file, in vectors_<topic>.go. They need the engine's internals, so
// they are package code, but none of them is exported: the mlsvectors
// command and the tests reach them through mls/internal/vectors, to which
// init hands them. That registration is the only thing this package does
// at initialisation.

func init() {
	m := make(map[string]vectors.Checker, len(vectorCheckers))
	for name, check := range vectorCheckers {
		m[name] = func(data []byte, runCase func(string, func() error)) error {
			return check(data, &vectorRun{runCase: runCase})
		}
	}
	vectors.Register(m)
}

// hexBytes is a byte string written as hex in the vector JSON.
type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	*h = b
	return nil
}

// vectorRun receives the test cases of one file. runCase runs f as the
// case called name.
type vectorRun struct {
	runCase func(name string, f func() error)
}

// errSkip marks a case that cannot run here; wrap it with the reason.
var errSkip = vectors.ErrSkip

// vectorCheckers maps a vector file name to its checker. Keep one line per
// file, sorted by name.
var vectorCheckers = map[string]func(data []byte, r *vectorRun) error{
	"crypto-basics.json":                  checkCryptoBasics,
	"deserialization.json":                checkDeserialization,
	"key-schedule.json":                   checkKeySchedule,
	"message-protection.json":             checkMessageProtection,
	"messages.json":                       checkMessages,
	"passive-client-handling-commit.json": checkPassiveClient,
	"passive-client-random.json":          checkPassiveClient,
	"passive-client-welcome.json":         checkPassiveClient,
	"psk_secret.json":                     checkPSKSecret,
	"secret-tree.json":                    checkSecretTree,
	"transcript-hashes.json":              checkTranscriptHashes,
	"tree-math.json":                      checkTreeMath,
	"tree-operations.json":                checkTreeOperations,
	"tree-validation.json":                checkTreeValidation,
	"treekem.json":                        checkTreeKEM,
	"welcome.json":                        checkWelcome,
}

// skipSuite returns an errSkip error when cs is not implemented here.
func skipSuite(cs CipherSuite) (suite, error) {
	s, err := suiteFor(cs)
	if err != nil {
		if cs == MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448 || cs == MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448 {
			return nil, fmt.Errorf("%w: X448/Ed448 not implemented", errSkip)
		}
		return nil, err
	}
	return s, nil
}

// expectEqual reports a mismatch of a named output.
func expectEqual(what string, got, want []byte) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: got %x, want %x", what, got, want)
	}
	return nil
}
