package seglog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRecordFindsOlderRecords: a backup checks each row's record in the
// copied segments; a record written before records named no sender
// carries one, of a length the row no longer says, and is found all the
// same; a record that is not there is ErrReused.
func TestCheckRecordFindsOlderRecords(t *testing.T) {
	const seg = 7
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := bytes.Repeat([]byte{0xee}, 100)
	var ats []int64
	for i, sub := range []string{"", "an-account-of-old", strings.Repeat("s", 300)} {
		start := len(b)
		var at int
		b, at, err = AppendRecord(b, Seed(seg), &Record{Kind: KindEntry, Seq: uint64(i + 1), Channel: chanA, Sub: sub, Payload: []byte("payload")})
		if err != nil {
			t.Fatal(err)
		}
		ats = append(ats, int64(start+at))
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	for i, at := range ats {
		if _, err := CheckRecord(f, seg, chanA, uint64(i+1), at, int64(len("payload")), nil); err != nil {
			t.Errorf("record %d: %v", i+1, err)
		}
		if _, err := CheckRecord(f, seg, chanA, uint64(i+2), at, int64(len("payload")), nil); err != ErrReused {
			t.Errorf("record %d as seq %d: %v, want ErrReused", i+1, i+2, err)
		}
	}
}
