package mls

import (
	"encoding/json"
	"errors"
	"fmt"
)

// checkCryptoBasics runs crypto-basics.json: the labelled operations of
// RFC 9420, Section 5, one case per cipher suite.
func checkCryptoBasics(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite CipherSuite `json:"cipher_suite"`
		RefHash     struct {
			Label string   `json:"label"`
			Value hexBytes `json:"value"`
			Out   hexBytes `json:"out"`
		} `json:"ref_hash"`
		ExpandWithLabel struct {
			Secret  hexBytes `json:"secret"`
			Label   string   `json:"label"`
			Context hexBytes `json:"context"`
			Length  int      `json:"length"`
			Out     hexBytes `json:"out"`
		} `json:"expand_with_label"`
		DeriveSecret struct {
			Secret hexBytes `json:"secret"`
			Label  string   `json:"label"`
			Out    hexBytes `json:"out"`
		} `json:"derive_secret"`
		DeriveTreeSecret struct {
			Secret     hexBytes `json:"secret"`
			Label      string   `json:"label"`
			Generation uint32   `json:"generation"`
			Length     int      `json:"length"`
			Out        hexBytes `json:"out"`
		} `json:"derive_tree_secret"`
		SignWithLabel struct {
			Priv      hexBytes `json:"priv"`
			Pub       hexBytes `json:"pub"`
			Content   hexBytes `json:"content"`
			Label     string   `json:"label"`
			Signature hexBytes `json:"signature"`
		} `json:"sign_with_label"`
		EncryptWithLabel struct {
			Priv       hexBytes `json:"priv"`
			Pub        hexBytes `json:"pub"`
			Label      string   `json:"label"`
			Context    hexBytes `json:"context"`
			Plaintext  hexBytes `json:"plaintext"`
			KEMOutput  hexBytes `json:"kem_output"`
			Ciphertext hexBytes `json:"ciphertext"`
		} `json:"encrypt_with_label"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: crypto-basics.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			var errs []error
			check := func(what string, got, want []byte) {
				if err := expectEqual(what, got, want); err != nil {
					errs = append(errs, err)
				}
			}

			check("ref_hash", refHash(s, c.RefHash.Label, c.RefHash.Value), c.RefHash.Out)

			e := c.ExpandWithLabel
			check("expand_with_label", expandWithLabel(s, e.Secret, e.Label, e.Context, e.Length), e.Out)

			d := c.DeriveSecret
			check("derive_secret", deriveSecret(s, d.Secret, d.Label), d.Out)

			t := c.DeriveTreeSecret
			check("derive_tree_secret", deriveTreeSecret(s, t.Secret, t.Label, t.Generation, t.Length), t.Out)

			sg := c.SignWithLabel
			if pub, err := s.signPublicFromPrivate(sg.Priv); err != nil {
				errs = append(errs, fmt.Errorf("sign_with_label: %w", err))
			} else {
				check("sign_with_label public key", pub, sg.Pub)
			}
			if !verifyWithLabel(s, sg.Pub, sg.Label, sg.Content, sg.Signature) {
				errs = append(errs, errors.New("sign_with_label: given signature does not verify"))
			}
			if sig, err := signWithLabel(s, sg.Priv, sg.Label, sg.Content); err != nil {
				errs = append(errs, fmt.Errorf("sign_with_label: %w", err))
			} else if !verifyWithLabel(s, sg.Pub, sg.Label, sg.Content, sig) {
				errs = append(errs, errors.New("sign_with_label: own signature does not verify"))
			}
			if verifyWithLabel(s, sg.Pub, sg.Label+"x", sg.Content, sg.Signature) {
				errs = append(errs, errors.New("sign_with_label: signature verifies under another label"))
			}

			en := c.EncryptWithLabel
			if pub, err := s.hpkePublicFromPrivate(en.Priv); err != nil {
				errs = append(errs, fmt.Errorf("encrypt_with_label: %w", err))
			} else {
				check("encrypt_with_label public key", pub, en.Pub)
			}
			if pt, err := decryptWithLabel(s, en.Priv, en.Label, en.Context, en.KEMOutput, en.Ciphertext); err != nil {
				errs = append(errs, fmt.Errorf("encrypt_with_label: given ciphertext: %w", err))
			} else {
				check("encrypt_with_label plaintext", pt, en.Plaintext)
			}
			if kem, ct, err := encryptWithLabel(s, en.Pub, en.Label, en.Context, en.Plaintext); err != nil {
				errs = append(errs, fmt.Errorf("encrypt_with_label: %w", err))
			} else if pt, err := decryptWithLabel(s, en.Priv, en.Label, en.Context, kem, ct); err != nil {
				errs = append(errs, fmt.Errorf("encrypt_with_label: own ciphertext: %w", err))
			} else {
				check("encrypt_with_label round trip", pt, en.Plaintext)
			}
			return errors.Join(errs...)
		})
	}
	return nil
}
