//go:build !race

package relay

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
