package seat_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestParseDIDKeyRefuses: only the canonical did:key of an Ed25519 key
// parses; anything else is ErrNotDIDKey.
func TestParseDIDKeyRefuses(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	did := seat.DIDKey(pub)
	if got, err := seat.ParseDIDKey(did); err != nil || !got.Equal(pub) {
		t.Fatalf("ParseDIDKey(DIDKey(pub)) = %x, %v", got, err)
	}
	for _, bad := range []string{
		"", "did:web:example.com", "did:key:", "did:key:z0OIl", // not base58
		did[:len(did)-1],                      // a byte short
		"did:key:z" + strings.Repeat("2", 70), // too long
		strings.Replace(did, "did:key:", "did:KEY:", 1),
	} {
		if _, err := seat.ParseDIDKey(bad); !errors.Is(err, seat.ErrNotDIDKey) {
			t.Errorf("ParseDIDKey(%q) = %v, want ErrNotDIDKey", bad, err)
		}
	}
}

// TestParseSuiteRefuses: a room's suite is "pq" or "classic"; any other
// name is ErrSuite, naming it.
func TestParseSuiteRefuses(t *testing.T) {
	for name, want := range map[string]any{"pq": seat.SuitePQ, "classic": seat.SuiteClassic} {
		if got, err := seat.ParseSuite(name); err != nil || got != want {
			t.Errorf("ParseSuite(%q) = %v, %v", name, got, err)
		}
	}
	for _, bad := range []string{"", "PQ", "xwing", "1"} {
		if _, err := seat.ParseSuite(bad); !errors.Is(err, seat.ErrSuite) || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseSuite(%q) = %v, want ErrSuite naming it", bad, err)
		}
	}
}

// TestClientsWithoutURL: a directory or relay client with no URL
// configured says so rather than dialing nothing.
func TestClientsWithoutURL(t *testing.T) {
	ctx := context.Background()
	if _, err := (&seat.DirectoryClient{}).CreateAccount(ctx, "a@example.com", "acme"); !errors.Is(err, seat.ErrNoDirectoryURL) {
		t.Errorf("directory client without a URL: %v, want ErrNoDirectoryURL", err)
	}
	if _, _, err := (&seat.RelayClient{}).Messages(ctx, "acme/x/y", 0, 10); !errors.Is(err, seat.ErrNoRelayURL) {
		t.Errorf("relay client without a URL: %v, want ErrNoRelayURL", err)
	}
	s, err := seat.Open(ctx, seat.Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.RequestDevice(ctx, "laptop"); !errors.Is(err, seat.ErrNoDirectoryURL) {
		t.Errorf("RequestDevice without a directory URL: %v, want ErrNoDirectoryURL", err)
	}
}

// TestRequestDeviceWhenSignedIn: a home that is signed in already is not
// a new device: RequestDevice refuses with ErrSignedIn and asks nothing of
// the directory.
func TestRequestDeviceWhenSignedIn(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	s := openSeat(t, st, t.TempDir())
	if _, err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignIn(ctx, "alice@example.com", "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestDevice(ctx, "laptop"); !errors.Is(err, seat.ErrSignedIn) {
		t.Fatalf("RequestDevice on a signed-in home: %v, want ErrSignedIn", err)
	}
}
