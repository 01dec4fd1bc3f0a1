package seat_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestDirectoryClientFollowsPages: the directory answers a channel's
// members and a stock's claims in pages; Members returns all 602 members
// of a channel (more than one page) once each, owner first, and Stock all
// 250 claims on a person's stock (more than two pages) once each, in
// order.
func TestDirectoryClientFollowsPages(t *testing.T) {
	ctx := context.Background()
	// Rate limits off: the test claims far faster than one account may.
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{Limits: directory.Limits{Off: true}}})
	dave := newMember(t, st, "daveco")
	owner := st.NewAccount(t, "ownerco")
	dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: owner.APIKey}
	const ch = "ownerco/big/room"
	if err := dir.RegisterChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	wantMembers := []string{owner.ID, dave.acct.AccountID}
	if err := dir.AddMember(ctx, ch, dave.acct.AccountID); err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		a := st.NewAccount(t, fmt.Sprint("m", i))
		if err := dir.AddMember(ctx, ch, a.ID); err != nil {
			t.Fatal(err)
		}
		wantMembers = append(wantMembers, a.ID)
	}
	m, err := dir.Members(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range m.Members {
		got = append(got, e.AccountID)
	}
	if m.Owner != owner.ID || m.Channel != ch || !slices.Equal(got, wantMembers) {
		t.Fatalf("members: owner %q, %d members, want %d in order", m.Owner, len(got), len(wantMembers))
	}

	var wantClaims []string
	for range 250 {
		cs, err := dir.ClaimKeyPackages(ctx, dave.acct.AccountID, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			wantClaims = append(wantClaims, c.ClaimID)
		}
	}
	stock, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: dave.acct.APIKey}).Stock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, c := range stock.Claims {
		got = append(got, c.ID)
	}
	if len(stock.Devices) != 1 || !slices.Equal(got, wantClaims) {
		t.Fatalf("stock: %d devices, %d claims, want 1 and the %d in order", len(stock.Devices), len(got), len(wantClaims))
	}
}

// TestAddTokensFollowsPages: the directory answers an account's
// add-tokens in pages of 50; AddTokens returns all 100 an account may
// hold (two pages) once each, newest first.
func TestAddTokensFollowsPages(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{Limits: directory.Limits{Off: true}}})
	a := st.NewAccount(t, "tokenco")
	dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey}
	var made []string
	for range directory.MaxAddTokens {
		tok, err := dir.CreateAddToken(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, tok.ID)
	}
	toks, err := dir.AddTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, tok := range toks {
		if seen[tok.ID] {
			t.Fatalf("token %s listed twice", tok.ID)
		}
		seen[tok.ID] = true
		if i > 0 && tok.CreatedAt.After(toks[i-1].CreatedAt) {
			t.Fatalf("token %d is newer than the one before", i)
		}
	}
	for _, id := range made {
		if !seen[id] {
			t.Fatalf("AddTokens returned %d of %d tokens; %s is missing", len(toks), len(made), id)
		}
	}
}
