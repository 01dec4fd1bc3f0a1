package seat_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/skytale-oss/skytale/seat"
)

func Example() {
	// tally init: a new phrase (here parsed from a fixed one, for the output).
	phrase, err := seat.ParsePhrase(strings.Repeat("abandon ", 23) + "art")
	if err != nil {
		panic(err)
	}
	fmt.Println(phrase) // never the words

	seed := phrase.Seed()
	id := seed.Identity()
	fmt.Println(id.DID())

	// tally push: seal entries for the seat's own channel.
	key := seed.SyncKey()
	const ch = "acme/tally/notes"
	sealed, err := key.Seal(ch, []seat.Entry{seat.NewEntry("buy milk", time.Now())})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(sealed), string(sealed[:4]))

	// tally pull, on any device restored from the same phrase.
	batch, err := key.Open(ch, sealed)
	if err != nil {
		panic(err)
	}
	fmt.Println(batch.Entries[0].Text)
	// Output:
	// seat.Phrase(REDACTED)
	// did:key:z6Mkj6kZADnzMrGu2hNTz2G8zH1BTvfHiJoUXdcoRB5zsebX
	// 288 SKB1
	// buy milk
}
