// Command stack-two-seats runs a whole Skytale stack in one process, a
// directory and a relay on loopback, and two people's seats against it:
// Alice keeps an encrypted log that her second home restores through a
// device grant, and Alice and Bob talk in an MLS room.
//
//	go run ./examples/stack-two-seats
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skytale-oss/skytale"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// serve serves h on a loopback port until ctx ends, and returns its URL.
func serve(ctx context.Context, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	go func() { <-ctx.Done(); srv.Close() }()
	return "http://" + ln.Addr().String(), nil
}

func run(ctx context.Context, out io.Writer) (err error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	// The stack: both planes in memory, sharing a JWT secret.
	secret := make([]byte, 32)
	rand.Read(secret)
	stack, err := skytale.NewStack(context.Background(), skytale.StackConfig{
		JWTSecret:      secret,
		InternalSecret: []byte("example internal secret"),
		Directory:      skytale.DirectoryConfig{OpenSignup: true},
	})
	if err != nil {
		return err
	}
	defer stack.Close(context.Background())
	apiURL, err := serve(ctx, stack.Directory)
	if err != nil {
		return err
	}
	relayURL, err := serve(ctx, stack.Relay)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "skytale-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	open := func(name string) (*skytale.Seat, error) {
		return skytale.NewSeat(ctx, skytale.SeatConfig{Home: filepath.Join(dir, name), APIURL: apiURL, RelayURL: relayURL})
	}
	alice, err := open("alice")
	if err != nil {
		return err
	}
	defer alice.Close(context.Background())
	bob, err := open("bob")
	if err != nil {
		return err
	}
	defer bob.Close(context.Background())

	// Alice: a seed, an account, her sync channel, two log entries.
	must := func(_ any, e error) {
		if err == nil {
			err = e
		}
	}
	must(alice.Init(ctx))
	must(alice.SignIn(ctx, "alice@example.com", "alice"))
	must(alice.Connect(ctx))
	must(alice.Add(ctx, "buy milk"))
	must(alice.Add(ctx, "call mum"))
	must(alice.Push(ctx))
	if err != nil {
		return err
	}

	// Her second home: the phrase, then a device grant she approves.
	laptop, err := open("alice-laptop")
	if err != nil {
		return err
	}
	defer laptop.Close(context.Background())
	words, _ := alice.Phrase()
	must(laptop.Recover(ctx, strings.Join(words, " ")))
	grant, err := laptop.RequestDevice(ctx, "laptop")
	if err != nil {
		return err
	}
	grant.PollInterval = 50 * time.Millisecond
	done := make(chan error, 1)
	go func() { _, err := laptop.WaitDevice(ctx, grant); done <- err }()
	// Alice compares the fingerprint her phone shows for the request with
	// the one on the laptop's screen before she approves.
	pending, err := alice.PendingDevice(ctx, grant.UserCode)
	if err != nil {
		return err
	}
	if pending.Fingerprint != grant.Fingerprint {
		return fmt.Errorf("the request shows device %s, the laptop %s: not approving", pending.Fingerprint, grant.Fingerprint)
	}
	must(alice.ApproveDevice(ctx, grant.UserCode, grant.Fingerprint))
	must(nil, <-done)
	must(laptop.Pull(ctx, nil))
	entries, err := laptop.Log(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		fmt.Fprintf(out, "laptop log: %s\n", e.Text)
	}

	// A room: Alice creates and invites, Bob joins, Alice admits him.
	must(bob.Init(ctx))
	must(bob.SignIn(ctx, "bob@example.com", "bob"))
	team := alice.Room("team")
	room, err := team.Create(ctx, nil)
	if err != nil {
		return err
	}
	token, err := team.Invite(ctx, &skytale.InviteOptions{Uses: 1, TTL: time.Hour})
	if err != nil {
		return err
	}
	// Bob names the room by its channel: a bare name would be in his org.
	bobs := bob.Room(room)
	joined := make(chan error, 1)
	go func() { _, err := bobs.Join(ctx, token, &skytale.JoinOptions{Wait: 30 * time.Second}); joined <- err }()
	for admitted := 0; admitted == 0; {
		a, err := team.Admit(ctx)
		if err != nil {
			return err
		}
		admitted = len(a)
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-joined; err != nil {
		return err
	}
	must(team.Send(ctx, "hello bob"))
	msgs, err := bobs.Sync(ctx)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return errors.New("bob received nothing")
	}
	for _, m := range msgs {
		fmt.Fprintf(out, "bob got in %s: %q\n", m.Room, m.Text)
	}
	return err
}
