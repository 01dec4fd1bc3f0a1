//go:build !unix

package mls

import "time"

func processCPUTime() (time.Duration, bool) { return 0, false }
