package mls

import (
	"encoding/json"
	"errors"
	"fmt"
)

// checkWelcome runs welcome.json: decrypt the Welcome for the given
// KeyPackage, verify the GroupInfo signature with signer_pub and its
// confirmation tag with the key schedule run from the joiner_secret
// (§12.4.3.1).
func checkWelcome(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite CipherSuite `json:"cipher_suite"`
		InitPriv    hexBytes    `json:"init_priv"`
		SignerPub   hexBytes    `json:"signer_pub"`
		KeyPackage  hexBytes    `json:"key_package"`
		Welcome     hexBytes    `json:"welcome"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: welcome.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			if _, err := skipSuite(c.CipherSuite); err != nil {
				return err
			}
			var kp, w mlsMessage
			if err := unmarshal(c.KeyPackage, &kp); err != nil {
				return fmt.Errorf("key_package: %w", err)
			}
			if err := unmarshal(c.Welcome, &w); err != nil {
				return fmt.Errorf("welcome: %w", err)
			}
			if kp.WireFormat != WireFormatKeyPackage || w.WireFormat != WireFormatWelcome {
				return errors.New("unexpected wire formats")
			}
			j, err := openWelcome(w.Welcome, kp.KeyPackage, c.InitPriv, nil)
			if err != nil {
				return err
			}
			if _, _, err := j.epoch(); !errors.Is(err, errGroupInfoUnverified) {
				return fmt.Errorf("epoch before signature check: %v", err)
			}
			if err := j.verifySigner(c.SignerPub); err != nil {
				return err
			}
			_, _, err = j.epoch()
			return err
		})
	}
	return nil
}
