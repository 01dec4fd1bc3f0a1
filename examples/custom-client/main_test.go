package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestEightOperations(t *testing.T) {
	api, relay, stop, err := startStack()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, api, relay, &out); err != nil {
		t.Fatal(err)
	}
	want := `joined acme/support/chat at epoch 1
live seq 2 from did:web:owner.acme.example: hello from the owner
backfill: 1 application message(s), has_more false
sync: seq 1 entry_type 1
sync: seq 2 entry_type 0
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
