package mls

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestCryptoBasicsCatchesWrongValues changes each expected value of the
// first cases of crypto-basics.json in turn and checks that the checker
// notices every change.
func TestCryptoBasicsCatchesWrongValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(vectorsDir(t), "crypto-basics.json"))
	if err != nil {
		t.Skip(err)
	}
	var cases []map[string]any
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} { // an Ed25519 suite and an ECDSA one
		for fn, v := range cases[i] {
			fields, ok := v.(map[string]any)
			if !ok {
				continue
			}
			for field, val := range fields {
				t.Run(fmt.Sprintf("%d/%s/%s", i, fn, field), func(t *testing.T) {
					fields[field] = mutate(val)
					defer func() { fields[field] = val }()
					in, err := json.Marshal(cases[i : i+1])
					if err != nil {
						t.Fatal(err)
					}
					rep, err := checkVectorFile("crypto-basics.json", in)
					if err != nil {
						t.Fatal(err)
					}
					if rep.Failed != 1 {
						t.Errorf("changed %s.%s not detected: %+v", fn, field, rep)
					}
				})
			}
		}
	}
}

// mutate returns a different value of the same JSON kind: the last hex
// digit flipped, a label extended, a number incremented.
func mutate(v any) any {
	switch v := v.(type) {
	case string:
		if v == "" {
			return "00"
		}
		if _, err := hex.DecodeString(v); err == nil {
			last := v[len(v)-1]
			flip := byte('0')
			if last == '0' {
				flip = '1'
			}
			return v[:len(v)-1] + string(flip)
		}
		return v + "x"
	case float64:
		return v + 1
	}
	return v
}
