package seat

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func testSealer(t testing.TB) *localSealer {
	p, err := NewPhrase(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLocalSealer(p.Seed())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// FuzzLocalMessage: a history row's sealed body opens to what was sealed,
// for any sender and text; any plaintext sealed under the home's key (as
// a damaged or hostile writer with the key could store) and any body
// bytes at all give a message or an error, never a panic; and a body
// opens only for its own row.
func FuzzLocalMessage(f *testing.F) {
	f.Add("did:key:z6MkAlice", "hello", []byte{5, 'a'}, []byte("SKL1"))
	f.Add("", "", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []byte{})
	f.Add("did:key:z6MkBob#device", strings.Repeat("x", 300), []byte{}, []byte("SKL1\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	l := testSealer(f)
	f.Fuzz(func(t *testing.T, sender, text string, plain, body []byte) {
		m := RoomMessage{Room: "acme/rooms/ops", Seq: 42, Sender: sender, Text: text, Kind: NoticeName, Time: time.UnixMilli(1700000000000)}
		sealed := l.sealMessage(m)
		var buf openBuf
		got := RoomMessage{Room: m.Room, Seq: m.Seq, Kind: m.Kind}
		if err := l.openMessage(&got, m.Time.UnixMilli(), sealed, &buf); err != nil || got.Sender != sender || got.Text != text {
			t.Fatalf("round trip: %q %q %v", got.Sender, got.Text, err)
		}
		moved := RoomMessage{Room: m.Room, Seq: m.Seq + 1, Kind: m.Kind}
		if err := l.openMessage(&moved, m.Time.UnixMilli(), sealed, &buf); err == nil {
			t.Fatal("a body opened for another row")
		}
		forged := l.sealAD(messageAD(nil, m.Room, m.Seq, m.Kind, 1), plain)
		l.openMessage(&RoomMessage{Room: m.Room, Seq: m.Seq, Kind: m.Kind}, 1, forged, &buf)
		if err := l.openMessage(&RoomMessage{Room: m.Room, Seq: m.Seq, Kind: m.Kind}, 1, body, &buf); err == nil {
			t.Fatal("bytes not sealed by the home opened")
		}
	})
}
