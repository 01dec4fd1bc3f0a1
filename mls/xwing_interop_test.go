package mls

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The interoperability run with ts-mls for suite 0x004D. The artifacts in
// testdata/xwing-tsmls were exchanged once with ts-mls (versions recorded
// in the files; steps in internal/interop/tsmls/README.md); the tests here
// replay them with no network and no Node.js:
//
//   - flow A: ts-mls created a group, added a KeyPackage of this engine
//     (Welcome, ratchet tree out of band), committed with a path and sent
//     an application message; this engine joins, processes, decrypts, and
//     reaches the epoch ts-mls recorded;
//   - flow B: this engine created a group, added a KeyPackage of ts-mls,
//     committed with a path and sent a message; ts-mls joined, processed
//     and decrypted, recorded digests of what it consumed and the epoch it
//     reached, and replied; the saved state of this engine agrees with it
//     and reads the reply.
//
// -xwing.record=keypackage and -xwing.record=group write this engine's
// side of the run.

var xwingRecord = flag.String("xwing.record", "", "write this engine's side of the ts-mls interop run: keypackage or group")

const xwingInteropDir = "testdata/xwing-tsmls"

type xwingSummary struct {
	Epoch              uint64 `json:"epoch"`
	EpochAuthenticator string `json:"epoch_authenticator"`
	Members            int    `json:"members"`
	Exporter           string `json:"exporter,omitempty"`
}

type xwingTSGroup struct {
	Versions      map[string]string `json:"versions"`
	CipherSuite   uint16            `json:"cipher_suite"`
	DeriveKeyPair []struct {
		IKM       string `json:"ikm"`
		PublicKey string `json:"public_key"`
	} `json:"derive_key_pair"`
	KeyPackage         string       `json:"key_package"`
	Welcome            string       `json:"welcome"`
	RatchetTree        string       `json:"ratchet_tree"`
	AfterAdd           xwingSummary `json:"after_add"`
	Commit             string       `json:"commit"`
	AfterCommit        xwingSummary `json:"after_commit"`
	ApplicationMessage string       `json:"application_message"`
	Plaintext          string       `json:"plaintext"`
	ConsumedGoKP       string       `json:"consumed_go_key_package_sha256"`
}

type xwingGoKeyPackage struct {
	KeyPackage string `json:"key_package"`
	Bundle     string `json:"bundle"`
}

type xwingTSKeyPackage struct {
	KeyPackage string `json:"key_package"`
}

type xwingGoGroup struct {
	Welcome            string `json:"welcome"`
	RatchetTree        string `json:"ratchet_tree"`
	Commit             string `json:"commit"`
	CommitWireFormat   string `json:"commit_wireformat"`
	ApplicationMessage string `json:"application_message"`
	Plaintext          string `json:"plaintext"`
	State              string `json:"state"`
}

type xwingTSAccepted struct {
	Versions       map[string]string `json:"versions"`
	ConsumedSHA256 map[string]string `json:"consumed_sha256"`
	AfterJoin      xwingSummary      `json:"after_join"`
	AfterCommit    xwingSummary      `json:"after_commit"`
	Decrypted      string            `json:"decrypted"`
	Reply          string            `json:"reply"`
	ReplyPlaintext string            `json:"reply_plaintext"`
}

// The exporter both sides compute after the Commit.
const xwingExporterLabel = "skytale interop"

var xwingExporterContext = []byte{1, 2, 3}

func readXWingJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(xwingInteropDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func writeXWingJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xwingInteropDir, name), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func expectSummary(t *testing.T, what string, g *Group, want xwingSummary) {
	t.Helper()
	if g.Epoch() != want.Epoch {
		t.Fatalf("%s: epoch %d, ts-mls %d", what, g.Epoch(), want.Epoch)
	}
	if got := hex.EncodeToString(g.EpochAuthenticator()); got != want.EpochAuthenticator {
		t.Fatalf("%s: epoch authenticator %s, ts-mls %s", what, got, want.EpochAuthenticator)
	}
	if len(g.Members()) != want.Members {
		t.Fatalf("%s: %d members, ts-mls %d", what, len(g.Members()), want.Members)
	}
	if want.Exporter != "" {
		e, err := g.Export(xwingExporterLabel, xwingExporterContext, 32)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(e); got != want.Exporter {
			t.Fatalf("%s: exporter %s, ts-mls %s", what, got, want.Exporter)
		}
	}
}

// TestXWingTSMLSDeriveKeyPair: the node key pairs ts-mls (hpke-js) derives
// from fixed secrets are the ones this engine derives.
func TestXWingTSMLSDeriveKeyPair(t *testing.T) {
	var ts xwingTSGroup
	readXWingJSON(t, "tsmls-group.json", &ts)
	s, _ := suiteFor(xwing)
	if len(ts.DeriveKeyPair) == 0 {
		t.Fatal("no DeriveKeyPair cases recorded")
	}
	for _, c := range ts.DeriveKeyPair {
		_, pub, err := s.hpkeDeriveKeyPair(unhex(t, c.IKM))
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(pub); got != c.PublicKey {
			t.Errorf("ikm %s: public key differs from ts-mls's", c.IKM)
		}
	}
}

// TestXWingTSMLSJoin is flow A: this engine joins the group ts-mls
// created, processes its Commit with a path and reads its message.
func TestXWingTSMLSJoin(t *testing.T) {
	var ts xwingTSGroup
	readXWingJSON(t, "tsmls-group.json", &ts)
	var mine xwingGoKeyPackage
	readXWingJSON(t, "go-keypackage.json", &mine)
	if ts.CipherSuite != uint16(xwing) {
		t.Fatalf("recorded suite %#04x", ts.CipherSuite)
	}
	if ts.ConsumedGoKP != sha256Hex(unhex(t, mine.KeyPackage)) {
		t.Fatal("ts-mls consumed another KeyPackage than the one recorded")
	}
	t.Logf("recorded with %v", ts.Versions)
	bundle, err := ParseKeyPackageBundle(unhex(t, mine.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bundle.Bytes(), unhex(t, mine.KeyPackage)) {
		t.Fatal("recorded bundle and KeyPackage differ")
	}

	g, err := Join(unhex(t, ts.Welcome), bundle, &JoinOptions{RatchetTree: unhex(t, ts.RatchetTree)}, nil)
	if err != nil {
		t.Fatalf("joining from the ts-mls Welcome: %v", err)
	}
	if g.CipherSuite() != xwing {
		t.Fatalf("suite %v", g.CipherSuite())
	}
	expectSummary(t, "after join", g, ts.AfterAdd)

	rec, err := g.Process(unhex(t, ts.Commit))
	if err != nil {
		t.Fatalf("processing the ts-mls Commit: %v", err)
	}
	if rec.Kind != KindCommit || rec.SenderIdentity != "did:key:ts-alice" {
		t.Fatalf("commit: %+v", rec)
	}
	expectSummary(t, "after commit", g, ts.AfterCommit)

	rec, err = g.Process(unhex(t, ts.ApplicationMessage))
	if err != nil {
		t.Fatalf("reading the ts-mls message: %v", err)
	}
	if rec.Kind != KindApplication || string(rec.Data) != ts.Plaintext {
		t.Fatalf("message: %+v", rec)
	}

	// The ts-mls KeyPackage passes this engine's checks.
	owner := newSuiteTestGroup(t, xwing, "did:key:go-owner", nil).members["did:key:go-owner"]
	if _, err := owner.AddMembers(unhex(t, ts.KeyPackage)); err != nil {
		t.Fatalf("adding the ts-mls KeyPackage: %v", err)
	}
}

// TestXWingTSMLSAccepted is flow B: what ts-mls consumed is the recorded
// output of this engine, and the state this engine kept agrees with the
// epoch ts-mls reached and reads its reply.
func TestXWingTSMLSAccepted(t *testing.T) {
	var out xwingGoGroup
	readXWingJSON(t, "go-group.json", &out)
	var acc xwingTSAccepted
	readXWingJSON(t, "tsmls-accepted.json", &acc)
	t.Logf("accepted by %v", acc.Versions)
	for name, b := range map[string]string{
		"welcome": out.Welcome, "ratchet_tree": out.RatchetTree, "commit": out.Commit, "application_message": out.ApplicationMessage,
	} {
		if acc.ConsumedSHA256[name] != sha256Hex(unhex(t, b)) {
			t.Fatalf("ts-mls consumed another %s than the one recorded", name)
		}
	}
	if acc.Decrypted != out.Plaintext {
		t.Fatalf("ts-mls decrypted %q, sent %q", acc.Decrypted, out.Plaintext)
	}
	g, err := RestoreGroup(unhex(t, out.State), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.CipherSuite() != xwing {
		t.Fatalf("suite %v", g.CipherSuite())
	}
	expectSummary(t, "after commit", g, acc.AfterCommit)
	if acc.AfterJoin.Epoch+1 != acc.AfterCommit.Epoch {
		t.Fatalf("ts-mls joined at %d and reached %d", acc.AfterJoin.Epoch, acc.AfterCommit.Epoch)
	}
	rec, err := g.Process(unhex(t, acc.Reply))
	if err != nil {
		t.Fatalf("reading the ts-mls reply: %v", err)
	}
	if rec.Kind != KindApplication || string(rec.Data) != acc.ReplyPlaintext || rec.SenderIdentity != "did:key:ts-bob" {
		t.Fatalf("reply: %+v", rec)
	}
}

// TestXWingTSMLSRecord writes this engine's side of the run; it is
// skipped unless -xwing.record is given.
func TestXWingTSMLSRecord(t *testing.T) {
	switch *xwingRecord {
	case "":
		t.Skip("run with -xwing.record=keypackage or -xwing.record=group")
	case "keypackage":
		if err := os.MkdirAll(xwingInteropDir, 0o755); err != nil {
			t.Fatal(err)
		}
		b := newSuiteBundle(t, xwing, "did:key:go-bob")
		st, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		writeXWingJSON(t, "go-keypackage.json", xwingGoKeyPackage{
			KeyPackage: hex.EncodeToString(b.Bytes()), Bundle: hex.EncodeToString(st),
		})
	case "group":
		var ts xwingTSKeyPackage
		readXWingJSON(t, "tsmls-keypackage.json", &ts)
		g, err := NewGroup([]byte("skytale x-wing interop"), newSuiteBundle(t, xwing, "did:key:go-alice"), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Commit(CommitOptions{Add: [][]byte{unhex(t, ts.KeyPackage)}, Tree: TreeOutOfBand})
		if err != nil {
			t.Fatalf("adding the ts-mls KeyPackage: %v", err)
		}
		if err := g.ConfirmCommit(); err != nil {
			t.Fatal(err)
		}
		welcome, tree := res.Welcome, g.RatchetTree()
		// A Commit with a path, in a PrivateMessage.
		res, err = g.SelfUpdate()
		if err != nil {
			t.Fatal(err)
		}
		if err := g.ConfirmCommit(); err != nil {
			t.Fatal(err)
		}
		const plaintext = "hello from skytale over X-Wing"
		msg, err := g.Protect([]byte(plaintext), nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := g.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		writeXWingJSON(t, "go-group.json", xwingGoGroup{
			Welcome: hex.EncodeToString(welcome), RatchetTree: hex.EncodeToString(tree),
			Commit: hex.EncodeToString(res.Commit), CommitWireFormat: "mls_private_message",
			ApplicationMessage: hex.EncodeToString(msg), Plaintext: plaintext,
			State: hex.EncodeToString(st),
		})
	default:
		t.Fatalf("unknown -xwing.record=%q", *xwingRecord)
	}
}
