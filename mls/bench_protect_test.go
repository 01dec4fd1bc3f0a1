package mls

import (
	"bytes"
	"testing"
	"time"
)

// cpuMeter reports the process CPU time per operation as "cpu-ns/op"
// alongside ns/op. Run with GOMAXPROCS=1 for it to mean one core.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPUMeter() cpuMeter {
	t, ok := processCPUTime()
	return cpuMeter{t, ok}
}

func (m cpuMeter) report(b *testing.B) {
	if t, ok := processCPUTime(); ok && m.ok && b.N > 0 {
		b.ReportMetric(float64(t-m.start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkPrivateMessageProtect measures sending a 1 KiB application
// message with suite 1: sign the FramedContent (§6.1) with the sender's
// parsed signature key, encrypt it and the sender data (§6.3), and encode
// the MLSMessage.
func BenchmarkPrivateMessageProtect(b *testing.B) {
	f := newProtectFixture(b, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	sk, err := f.s.(*cipherSuite).signKey(f.sigPriv)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkProtect(b, f, func(fc *framedContent) (*authenticatedContent, error) {
		return signFramedContentWithKey(sk, WireFormatPrivateMessage, fc, f.gc)
	})
}

// BenchmarkPrivateMessageProtectSeedKey is BenchmarkPrivateMessageProtect
// with the signature key given as its stored form (the Ed25519 seed), which
// is expanded again for every message.
func BenchmarkPrivateMessageProtectSeedKey(b *testing.B) {
	f := newProtectFixture(b, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	benchmarkProtect(b, f, func(fc *framedContent) (*authenticatedContent, error) {
		return signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, fc, f.gc)
	})
}

func benchmarkProtect(b *testing.B, f *protectFixture, sign func(*framedContent) (*authenticatedContent, error)) {
	data := bytes.Repeat([]byte{'m'}, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	cpu := startCPUMeter()
	for b.Loop() {
		ac, err := sign(f.content(ContentTypeApplication, data))
		if err != nil {
			b.Fatal(err)
		}
		pm, err := f.sender.protectPrivate(ac)
		if err != nil {
			b.Fatal(err)
		}
		_ = marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm})
	}
	cpu.report(b)
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
			msgs[i] = marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm})
		}
	}
	fill()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var filling time.Duration // CPU time spent preparing messages, not measured
	cpu := startCPUMeter()
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			t0, _ := processCPUTime()
			fill()
			t1, _ := processCPUTime()
			filling += t1 - t0
			i = 0
			b.StartTimer()
		}
		var msg mlsMessage
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
	cpu.start += filling
	cpu.report(b)
}
