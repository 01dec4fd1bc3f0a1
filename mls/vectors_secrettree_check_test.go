package mls

import (
	"encoding/json"
	"fmt"
)

// checkSecretTree runs secret-tree.json: sender data key and nonce (§6.3.2)
// and the handshake and application ratchets of every leaf (§9).
func checkSecretTree(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite CipherSuite `json:"cipher_suite"`
		SenderData  struct {
			SenderDataSecret hexBytes `json:"sender_data_secret"`
			Ciphertext       hexBytes `json:"ciphertext"`
			Key              hexBytes `json:"key"`
			Nonce            hexBytes `json:"nonce"`
		} `json:"sender_data"`
		EncryptionSecret hexBytes `json:"encryption_secret"`
		Leaves           [][]struct {
			Generation       uint32   `json:"generation"`
			HandshakeKey     hexBytes `json:"handshake_key"`
			HandshakeNonce   hexBytes `json:"handshake_nonce"`
			ApplicationKey   hexBytes `json:"application_key"`
			ApplicationNonce hexBytes `json:"application_nonce"`
		} `json:"leaves"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: secret-tree.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d/leaves-%d", i, c.CipherSuite, len(c.Leaves)), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			key, nonce := senderDataKeyNonce(s, c.SenderData.SenderDataSecret, c.SenderData.Ciphertext)
			if err := expectEqual("sender data key", key, c.SenderData.Key); err != nil {
				return err
			}
			if err := expectEqual("sender data nonce", nonce, c.SenderData.Nonce); err != nil {
				return err
			}
			t, err := newSecretTree(s, append([]byte(nil), c.EncryptionSecret...), uint32(len(c.Leaves)), secretTreeLimits{})
			if err != nil {
				return err
			}
			for leaf, gens := range c.Leaves {
				for _, g := range gens {
					for _, rt := range []struct {
						typ        ratchetType
						name       string
						key, nonce []byte
					}{
						{handshakeRatchet, "handshake", g.HandshakeKey, g.HandshakeNonce},
						{applicationRatchet, "application", g.ApplicationKey, g.ApplicationNonce},
					} {
						k, pending, err := t.receiveKey(uint32(leaf), rt.typ, g.Generation)
						if err != nil {
							return fmt.Errorf("leaf %d %s generation %d: %w", leaf, rt.name, g.Generation, err)
						}
						what := fmt.Sprintf("leaf %d %s generation %d", leaf, rt.name, g.Generation)
						if err := expectEqual(what+" key", k.key, rt.key); err != nil {
							return err
						}
						if err := expectEqual(what+" nonce", k.nonce, rt.nonce); err != nil {
							return err
						}
						pending.commit()
					}
				}
			}
			return nil
		})
	}
	return nil
}
