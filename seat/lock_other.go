//go:build !unix

package seat

import "os"

// Without flock, processes sharing a home rely on the compare-and-swap of
// saveRoom alone: a conflicting operation fails and can be retried.
func lockFile(*os.File) error   { return nil }
func unlockFile(*os.File) error { return nil }
