// Package vectors runs the IETF MLS test vectors
// (https://github.com/mlswg/mls-implementations, test-vectors.md) against
// package mls, for the mlsvectors command and the package's own tests.
//
// The checkers need the engine's internals, so they live in package mls,
// unexported; package mls hands them to this package with [Register] when
// it is initialised. Nothing here is part of the public API of mls.
package vectors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrSkip marks a case that cannot run here; checkers wrap it with the
// reason.
var ErrSkip = errors.New("skipped")

// A Checker checks the vector file data, calling runCase once per test
// case with the case's name and a function that checks it.
type Checker func(data []byte, runCase func(name string, f func() error)) error

// checkers is set once, by package mls, before any use.
var checkers map[string]Checker

// Register installs the checkers, by vector file name. Package mls calls
// it once, from its init function; nothing else may.
func Register(c map[string]Checker) {
	if checkers != nil {
		panic("vectors: Register called twice")
	}
	checkers = c
}

// Files returns the names of the vector files that have a checker,
// sorted.
func Files() []string {
	names := make([]string, 0, len(checkers))
	for name := range checkers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Report is the outcome of one vector file.
type Report struct {
	File                    string
	Passed, Failed, Skipped int
	SkipReasons             []string // distinct reasons, in order of first use
	Failures                []string // "case: error"
}

// Check runs the checker for the vector file called name over its
// contents. The error is for files that have no checker or do not parse;
// failing cases are counted in the report.
func Check(name string, data []byte) (Report, error) {
	rep := Report{File: name}
	check, ok := checkers[name]
	if !ok {
		return rep, fmt.Errorf("mls: no checker for vector file %q", name)
	}
	err := check(data, func(c string, f func() error) {
		err := RunCase(f)
		switch {
		case err == nil:
			rep.Passed++
		case errors.Is(err, ErrSkip):
			rep.Skipped++
			reason := strings.TrimPrefix(err.Error(), ErrSkip.Error()+": ")
			if !slices.Contains(rep.SkipReasons, reason) {
				rep.SkipReasons = append(rep.SkipReasons, reason)
			}
		default:
			rep.Failed++
			rep.Failures = append(rep.Failures, c+": "+err.Error())
		}
	})
	return rep, err
}

// CheckerFor returns the checker of the vector file called name.
func CheckerFor(name string) (Checker, bool) {
	c, ok := checkers[name]
	return c, ok
}

// RunCase runs one case, turning a panic inside it into a failure, so that
// one bad case cannot hide the others.
func RunCase(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}
