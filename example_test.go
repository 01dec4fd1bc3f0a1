package skytale_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/relay"
)

// mountRelay is the README's embedding snippet, word for word (a test in
// cli/ checks it).
func mountRelay(ctx context.Context, mux *http.ServeMux, dbPath string, secret []byte, accountID string) (*skytale.Relay, error) {
	members := relay.NewMemberSet() // who may use which channel; or the directory's feed
	members.Add("acme/events/live", accountID)
	r, err := skytale.NewRelay(ctx, skytale.RelayConfig{
		DBPath:    dbPath,  // the archive's SQLite file; "" keeps it in memory
		JWTSecret: secret,  // at least 32 random bytes, shared with whatever mints the tokens
		Members:   members, // required, unless OpenChannels: the app gates channels itself
	})
	if err != nil {
		return nil, err
	}
	mux.Handle("/", r)
	return r, nil // Close(ctx) it on shutdown: it flushes the archive and waits for its sockets
}

// A relay mounted on an application's own mux, next to its routes.
func ExampleNewRelay() {
	secret := make([]byte, skytale.MinJWTSecret)
	rand.Read(secret)
	mux := http.NewServeMux()
	mux.HandleFunc("/app", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "the application") })
	r, err := mountRelay(context.Background(), mux, "", secret, "0f724b70-9bad-4b8e-81ef-42ab975b6b9f")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer r.Close(context.Background())
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("relay /health:", resp.StatusCode)
	// Output: relay /health: 200
}
