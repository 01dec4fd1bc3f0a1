package seat_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestSignInOrgInvite: the first account of an org owns it; a second
// signup into it fails with ErrOrgTaken and changes nothing in the home,
// a bad invite fails with ErrInvalidOrgInvite, and an invite from an
// account of the org lets a new account in, as many times as its uses.
func TestSignInOrgInvite(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")

	carol := openSeat(t, st, t.TempDir())
	if _, err := carol.Init(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := carol.SignIn(ctx, "carol@acme.test", "acme")
	if !errors.Is(err, seat.ErrOrgTaken) {
		t.Fatalf("signup into an existing org: %v, want ErrOrgTaken", err)
	}
	if _, err := carol.Org(ctx); !errors.Is(err, seat.ErrNotSignedIn) {
		t.Fatalf("a refused signup left the home signed in (%v)", err)
	}
	if _, err := carol.SignInInvited(ctx, "carol@acme.test", "acme", "skt_org_nonsense"); !errors.Is(err, seat.ErrInvalidOrgInvite) {
		t.Fatalf("signup with a bad org invite: %v, want ErrInvalidOrgInvite", err)
	}

	tok, exp, err := alice.OrgInvite(ctx, 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "skt_org_") || time.Until(exp) <= 0 {
		t.Fatalf("org invite %q expires %v", tok, exp)
	}
	// An invite into acme is not one into another org.
	if _, err := carol.SignInInvited(ctx, "carol@bobco.test", "bobco", tok); !errors.Is(err, seat.ErrInvalidOrgInvite) {
		t.Fatalf("signup into another org with acme's invite: %v, want ErrInvalidOrgInvite", err)
	}
	a, err := carol.SignInInvited(ctx, "carol@acme.test", "acme", tok)
	if err != nil {
		t.Fatalf("signup with an org invite: %v", err)
	}
	if a.Org != "acme" || a.AccountID == alice.acct.AccountID {
		t.Fatalf("invited account %+v", a)
	}
	if org, err := carol.Org(ctx); err != nil || org != "acme" {
		t.Fatalf("home org %q, %v", org, err)
	}

	// The second use works, the third does not.
	dave := openSeat(t, st, t.TempDir())
	dave.Init(ctx)
	if _, err := dave.SignInInvited(ctx, "dave@acme.test", "acme", tok); err != nil {
		t.Fatalf("second use: %v", err)
	}
	erin := openSeat(t, st, t.TempDir())
	erin.Init(ctx)
	if _, err := erin.SignInInvited(ctx, "erin@acme.test", "acme", tok); !errors.Is(err, seat.ErrInvalidOrgInvite) {
		t.Fatalf("third use of a two-use invite: %v", err)
	}

	// An invited account of the org may invite in turn.
	if _, _, err := carol.OrgInvite(ctx, 0, 0); err != nil {
		t.Fatalf("org invite from an invited account: %v", err)
	}
	var ae *seat.APIError
	if _, _, err := alice.OrgInvite(ctx, 101, 0); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("org invite with 101 uses: %v, want 400", err)
	}
}
