package seat

import (
	"context"
	"testing"
)

func TestSettingsLiveInTheStore(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	if cfg, err := Settings(ctx, home); err != nil || len(cfg) != 0 {
		t.Fatalf("fresh home: %v %v", cfg, err)
	}
	if err := SetSetting(ctx, home, "relay_url", "http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if err := SetSetting(ctx, home, "relay_url", "http://127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	if err := SetSetting(ctx, home, "", "x"); err == nil {
		t.Fatal("empty key stored")
	}
	// A seat open on the same home sees and keeps them.
	s, err := Open(ctx, Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	cfg, err := Settings(ctx, home)
	if err != nil || cfg["relay_url"] != "http://127.0.0.1:2" || len(cfg) != 1 {
		t.Fatalf("settings: %v %v", cfg, err)
	}
}
