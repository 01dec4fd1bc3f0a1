package mls

import (
	"bytes"
	"testing"
)

// BenchmarkPrivateMessageProtect measures sending a 1 KiB application
// message with suite 1: sign the FramedContent (§6.1), encrypt it and the
// sender data (§6.3), and encode the MLSMessage.
func BenchmarkPrivateMessageProtect(b *testing.B) {
	f := newProtectFixture(b, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	f.sender.tree.limits.MaxForwardSkip = 1 << 31
	data := bytes.Repeat([]byte{'m'}, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fc := f.content(ContentTypeApplication, data)
		ac, err := signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, fc, f.gc)
		if err != nil {
			b.Fatal(err)
		}
		pm, err := f.sender.protectPrivate(ac)
		if err != nil {
			b.Fatal(err)
		}
		_ = marshal(&MLSMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm})
	}
}

// BenchmarkPrivateMessageUnprotect measures receiving a 1 KiB application
// message with suite 1: decode the MLSMessage, decrypt the sender data and
// the content, and verify the signature. Messages arrive in order.
func BenchmarkPrivateMessageUnprotect(b *testing.B) {
	f := newProtectFixture(b, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	data := bytes.Repeat([]byte{'m'}, 1024)
	const batch = 512
	msgs := make([][]byte, batch)
	fill := func() {
		for i := range msgs {
			pm := f.protect(b, f.content(ContentTypeApplication, data))
			msgs[i] = marshal(&MLSMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm})
		}
	}
	fill()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			fill()
			i = 0
			b.StartTimer()
		}
		var msg MLSMessage
		if err := unmarshal(msgs[i], &msg); err != nil {
			b.Fatal(err)
		}
		i++
		ac, err := f.receiver.unprotectPrivate(msg.PrivateMessage, f.signer)
		if err != nil {
			b.Fatal(err)
		}
		if len(ac.Content.ApplicationData) != len(data) {
			b.Fatal("wrong content")
		}
	}
}
