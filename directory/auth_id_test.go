package directory

import (
	"crypto/rand"
	"regexp"
	"testing"
)

func TestNewIDIsUUIDv4(t *testing.T) {
	s := &Server{cfg: Config{Rand: rand.Reader}}
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id, err := s.newID()
		if err != nil || !re.MatchString(id) || seen[id] {
			t.Fatalf("id %q, %v", id, err)
		}
		seen[id] = true
	}
}
