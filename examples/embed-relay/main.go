// Command embed-relay mounts a Skytale relay inside an existing HTTP server,
// next to the application's own routes, under /relay/.
//
// The application stays the authority for who may use the relay: its
// /token route mints the short-lived HS256 JWT the relay verifies (issuer
// skytale-api, audience skytale-relay, at most 300 seconds), for whichever
// user the application has authenticated. It is also the authority for
// who belongs to which channel: there is no directory here, so it keeps a
// relay.MemberSet, and the relay lets only members publish to a channel
// and read it.
//
//	SKYTALE_JWT_SECRET=$(openssl rand -hex 32) go run ./examples/embed-relay -addr 127.0.0.1:8080
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/relay"
)

// eventsChannel is the one channel of this example.
const eventsChannel = "acme/app/events"

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	archive := flag.String("archive", "", "SQLite file of the relay archive (default: in memory)")
	flag.Parse()
	secret := []byte(os.Getenv("SKYTALE_JWT_SECRET"))
	if len(secret) < 32 {
		log.Fatal("set SKYTALE_JWT_SECRET to at least 32 random bytes")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	h, closeRelay, err := newServer(secret, *archive)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, Handler: h}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Printf("app and relay on http://%s (relay under /relay/)", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	closeRelay()
}

// newServer is the application's mux with the relay mounted under /relay/.
// The returned func closes the relay (flushing its archive).
func newServer(secret []byte, archive string) (http.Handler, func(), error) {
	members := relay.NewMemberSet()
	rl, err := skytale.NewRelay(context.Background(), skytale.RelayConfig{JWTSecret: secret, DBPath: archive, Members: members})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()

	// The application's own routes.
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from the app; the relay is at /relay/")
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		user := currentUser(r)
		if user == "" {
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		// The application's membership rule, here the simplest: every
		// signed-in user belongs to the events channel. A real one
		// would Add and Remove as its own groups change.
		members.Add(eventsChannel, user)
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Issuer:    "skytale-api",
			Audience:  jwt.ClaimStrings{"skytale-relay"},
			Subject:   user,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
		}).SignedString(secret)
		if err != nil {
			http.Error(w, "cannot mint a token", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"token": tok})
	})

	// The relay: /relay/ws, /relay/v1/messages, /relay/v1/sync, /relay/health.
	mux.Handle("/relay/", http.StripPrefix("/relay", rl))

	return mux, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rl.Close(ctx)
	}, nil
}

// currentUser stands in for the application's own authentication; here a
// header names the user (a stable id, used as the JWT subject).
func currentUser(r *http.Request) string {
	return r.Header.Get("X-Demo-User")
}
