package mls

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// This file and vectors_<topic>_check_test.go hold the checkers of the
// IETF MLS test vectors (https://github.com/mlswg/mls-implementations,
// test-vectors.md), one per vector file. They need the engine's
// internals, so they are tests of package mls: no vector code is in the
// package's build.

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
var errSkip = errors.New("skipped")

// vectorReport is the outcome of one vector file.
type vectorReport struct {
	File                    string
	Passed, Failed, Skipped int
	SkipReasons             []string // distinct reasons, in order of first use
	Failures                []string // "case: error"
}

// checkVectorFile runs the checker of the vector file called name over
// its contents. The error is for files that have no checker or do not
// parse; failing cases are counted in the report.
func checkVectorFile(name string, data []byte) (vectorReport, error) {
	rep := vectorReport{File: name}
	check, ok := vectorCheckers[name]
	if !ok {
		return rep, fmt.Errorf("mls: no checker for vector file %q", name)
	}
	err := check(data, &vectorRun{runCase: func(c string, f func() error) {
		err := runVectorCase(f)
		switch {
		case err == nil:
			rep.Passed++
		case errors.Is(err, errSkip):
			rep.Skipped++
			reason := strings.TrimPrefix(err.Error(), errSkip.Error()+": ")
			if !slices.Contains(rep.SkipReasons, reason) {
				rep.SkipReasons = append(rep.SkipReasons, reason)
			}
		default:
			rep.Failed++
			rep.Failures = append(rep.Failures, c+": "+err.Error())
		}
	}})
	return rep, err
}

// runVectorCase runs one case, turning a panic inside it into a failure,
// so that one bad case cannot hide the others.
func runVectorCase(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

// vectorFiles returns the names of the vector files that have a checker,
// sorted.
func vectorFiles() []string {
	names := slices.Collect(maps.Keys(vectorCheckers))
	slices.Sort(names)
	return names
}

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
