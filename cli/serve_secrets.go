package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The two secrets of tally serve: the JWT secret (the directory signs
// tokens with it, every relay checks them) and the internal secret (the
// relays read the directory's feeds with it, the directory the relays'
// fence). Every directory and relay of a cluster must hold the same
// ones. A single node generates them into its data folder on first
// start; a node meant to join a cluster (--only relay, --relay-nats, or
// a directory on PostgreSQL) never does, for a node with secrets of its
// own serves, answers /health, and refuses every token of the others.
// It takes them from --jwt-secret-file and --internal-secret-file (or
// SKYTALE_JWT_SECRET_FILE / SKYTALE_INTERNAL_SECRET_FILE), from
// SKYTALE_JWT_SECRET / SKYTALE_INTERNAL_SECRET holding the secret itself,
// or from the data folder when the operator put them there.

// secretSources are where tally serve takes its secrets from.
type secretSources struct {
	// JWTFile and InternalFile are files holding the secrets; JWTEnv and
	// InternalEnv the secrets themselves (from the environment). Empty:
	// the data folder's.
	JWTFile, InternalFile string
	JWTEnv, InternalEnv   string
}

// secret is one secret's sources.
type secret struct {
	name, flag, env, dataFile string
	file, value               string
}

func (s secretSources) secrets() [2]secret {
	return [2]secret{
		{name: "JWT secret", flag: "--jwt-secret-file", env: "SKYTALE_JWT_SECRET", dataFile: "jwt_secret", file: s.JWTFile, value: s.JWTEnv},
		{name: "internal secret", flag: "--internal-secret-file", env: "SKYTALE_INTERNAL_SECRET", dataFile: "internal_secret", file: s.InternalFile, value: s.InternalEnv},
	}
}

// check refuses, before anything is created, secrets given twice, and
// for a node joining a cluster (joining) a secret it would have to
// generate.
func (s secretSources) check(data string, joining bool) error {
	for _, sec := range s.secrets() {
		if sec.file != "" && sec.value != "" {
			return badUsage(fmt.Sprintf("the %s is given twice, by %s and by %s", sec.name, sec.flag, sec.env), "give it once")
		}
		if !joining || sec.file != "" || sec.value != "" {
			continue
		}
		p := filepath.Join(data, sec.dataFile)
		if _, err := os.Stat(p); err == nil {
			continue // the operator put the cluster's there
		}
		return &usageError{fmt.Sprintf("this node joins a cluster (--only relay, --relay-nats or a PostgreSQL --directory-db) and has no %s; it does not make one of its own, which no other node would accept", sec.name),
			fmt.Sprintf("give the cluster's with %s FILE (or %s), the same on every directory and relay; make it once with: openssl rand -hex 32 (see docs/CLUSTER.md)", sec.flag, sec.env)}
	}
	return nil
}

// load returns the JWT and internal secrets: given ones read and checked,
// the others from the data folder, generated there on first use.
func (s secretSources) load(data string) (jwtSecret, internal []byte, err error) {
	var out [2][]byte
	for i, sec := range s.secrets() {
		switch {
		case sec.file != "":
			b, err := os.ReadFile(sec.file)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", sec.flag, err)
			}
			if out[i], err = parseSecret(string(b)); err != nil {
				return nil, nil, fmt.Errorf("%s: %s %w", sec.flag, sec.file, err)
			}
		case sec.value != "":
			if out[i], err = parseSecret(sec.value); err != nil {
				return nil, nil, fmt.Errorf("%s %w", sec.env, err)
			}
		default:
			if out[i], err = loadSecret(filepath.Join(data, sec.dataFile)); err != nil {
				return nil, nil, err
			}
		}
	}
	return out[0], out[1], nil
}

// errBadSecret is the error of a secret that is not hex of at least 32
// bytes; it never quotes the text.
var errBadSecret = errors.New("is not a secret of at least 32 bytes in hex (make one with: openssl rand -hex 32)")

// parseSecret checks a secret's text: at least 32 bytes in hex, spaces
// around it ignored. The secret is the hex text itself.
func parseSecret(text string) ([]byte, error) {
	t := strings.TrimSpace(text)
	if raw, err := hex.DecodeString(t); err != nil || len(raw) < 32 {
		return nil, errBadSecret
	}
	return []byte(t), nil
}

// isPostgresURL reports whether dsn names a PostgreSQL database (as the
// directory tells them apart).
func isPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// loadSecret reads a secret from path, creating it (mode 0600) the first
// time as 32 random bytes in hex. The secret is the hex text itself, so the
// operator can paste it into an Authorization header. The new file appears
// whole or not at all (written aside, then linked into place), so two
// planes starting at once on one folder agree on the secret.
func loadSecret(path string) ([]byte, error) {
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			s := strings.TrimSpace(string(b))
			if raw, err := hex.DecodeString(s); err != nil || len(raw) < 32 {
				return nil, fmt.Errorf("%s is not a 32-byte hex secret; remove it to generate a new one", path)
			}
			return []byte(s), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		created, err := createSecret(path)
		if err != nil || created != nil {
			return created, err
		}
		// Another process created it first: read theirs.
	}
}

// createSecret writes a new secret to path, or returns nil, nil if path
// appeared meanwhile.
func createSecret(path string) ([]byte, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	s := []byte(hex.EncodeToString(raw))
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(append(s, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, nil
		}
		return nil, err
	}
	return s, nil
}
