package mls

import (
	"encoding/json"
	"fmt"
)

// checkDeserialization runs deserialization.json: the variable-length
// vector headers of RFC 9420, Section 2.1.2.
func checkDeserialization(data []byte, r *vectorRun) error {
	var cases []struct {
		Header hexBytes `json:"vlbytes_header"`
		Length int      `json:"length"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: deserialization.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/%x", i, []byte(c.Header)), func() error {
			n, ok := readVarint(c.Header)
			if !ok || varintSize(c.Header[0]) != len(c.Header) {
				return fmt.Errorf("header %x does not decode", []byte(c.Header))
			}
			if n != c.Length {
				return fmt.Errorf("header %x: got length %d, want %d", []byte(c.Header), n, c.Length)
			}
			var b builder
			b.varint(n)
			if err := expectEqual("re-encoded header", b.bytes(), c.Header); err != nil {
				return err
			}
			return nil
		})
	}
	return nil
}
