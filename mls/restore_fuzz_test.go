package mls

import (
	"bytes"
	"runtime"
	"testing"
)

// FuzzRestoreGroup feeds RestoreGroup corrupted saved states. The seeds
// are real states of small groups (stateCorpus). The checksum of a
// version 2 input is recomputed first, as the author of a hostile state
// file would, so that the fuzzer reaches the field checks behind it.
//
// A state either fails to restore, or restores into a group that
// re-encodes to exactly the input and survives the next operations of a
// member without a panic. Restoring never allocates more than a small
// multiple of the input.
func FuzzRestoreGroup(f *testing.F) {
	states, _ := stateCorpus(f)
	for _, st := range states {
		f.Add(st)
	}
	// Keep everything the state holds, so that it re-encodes unchanged.
	cfg := &Config{MaxPastEpochs: maxStatePastEpochs, MaxRetainedKeys: 1 << 30}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = resealState(data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g, err := RestoreGroup(data, cfg)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64*uint64(len(data))+1<<20 {
			t.Fatalf("restoring %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		st, err := g.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if data[0] == stateVersion && !bytes.Equal(st, data) {
			t.Fatal("a restored state re-encodes differently")
		}
		exercise(g, nil)
	})
}
