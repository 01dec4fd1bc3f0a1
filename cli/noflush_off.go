//go:build !benchnoflush

package cli

// benchNoFlush is true only in a benchmark build (noflush_on.go).
const benchNoFlush = false
