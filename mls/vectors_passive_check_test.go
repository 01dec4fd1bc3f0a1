package mls

import (
	"encoding/json"
	"fmt"
)

// This file checks the passive client scenarios of the IETF vectors
// (passive-client-welcome, passive-client-handling-commit and
// passive-client-random): a client joins from a Welcome, then follows the
// group through a list of epochs, each made of proposals and a Commit, and
// must compute every epoch's epoch_authenticator.

type passiveClientCase struct {
	CipherSuite  CipherSuite `json:"cipher_suite"`
	ExternalPSKs []struct {
		PSKID hexBytes `json:"psk_id"`
		PSK   hexBytes `json:"psk"`
	} `json:"external_psks"`
	KeyPackage                hexBytes `json:"key_package"`
	SignaturePriv             hexBytes `json:"signature_priv"`
	EncryptionPriv            hexBytes `json:"encryption_priv"`
	InitPriv                  hexBytes `json:"init_priv"`
	Welcome                   hexBytes `json:"welcome"`
	RatchetTree               hexBytes `json:"ratchet_tree"`
	InitialEpochAuthenticator hexBytes `json:"initial_epoch_authenticator"`
	Epochs                    []struct {
		Proposals          []hexBytes `json:"proposals"`
		Commit             hexBytes   `json:"commit"`
		EpochAuthenticator hexBytes   `json:"epoch_authenticator"`
	} `json:"epochs"`
}

func checkPassiveClient(data []byte, r *vectorRun) error {
	var cases []passiveClientCase
	if err := json.Unmarshal(data, &cases); err != nil {
		return err
	}
	for i := range cases {
		c := &cases[i]
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error { return c.run() })
	}
	return nil
}

func (c *passiveClientCase) run() error {
	s, err := skipSuite(c.CipherSuite)
	if err != nil {
		return err
	}
	kp, err := parseKeyPackage(c.KeyPackage)
	if err != nil {
		return err
	}
	// Some generators drop the leading zero bytes of P-521 scalars; the
	// suite wants them at full length.
	hpkeLen := 0
	if priv, _, err := s.hpkeGenerateKeyPair(); err == nil {
		hpkeLen = len(priv)
	}
	b := &KeyPackageBundle{s: s, kp: *kp,
		initPriv: leftPad(c.InitPriv, hpkeLen), encPriv: leftPad(c.EncryptionPriv, hpkeLen), sigPriv: padECDSAScalar(s, c.SignaturePriv)}
	// The private keys must match the KeyPackage.
	if err := b.check(); err != nil {
		return err
	}
	cfg := &Config{
		ExternalPSKs: make(map[string][]byte),
		// The vectors were generated long ago; their lifetimes are not
		// meant to be checked against today's date.
		SkipLifetimeCheck: true,
		MaxPastEpochs:     -1,
	}
	for _, p := range c.ExternalPSKs {
		cfg.ExternalPSKs[string(p.PSKID)] = p.PSK
	}
	g, err := Join(c.Welcome, b, &JoinOptions{RatchetTree: c.RatchetTree}, cfg)
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	if err := expectEqual("initial epoch authenticator", g.EpochAuthenticator(), c.InitialEpochAuthenticator); err != nil {
		return err
	}
	for i, e := range c.Epochs {
		for j, p := range e.Proposals {
			if _, err := g.Process(p); err != nil {
				return fmt.Errorf("epoch %d: proposal %d: %w", i, j, err)
			}
		}
		rec, err := g.Process(e.Commit)
		if err != nil {
			return fmt.Errorf("epoch %d: commit: %w", i, err)
		}
		if rec.Kind != KindCommit {
			return fmt.Errorf("epoch %d: commit message is not a commit", i)
		}
		if err := expectEqual(fmt.Sprintf("epoch %d authenticator", i), g.EpochAuthenticator(), e.EpochAuthenticator); err != nil {
			return err
		}
	}
	return nil
}

// leftPad returns b with leading zero bytes added up to n bytes.
func leftPad(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return append(make([]byte, n-len(b)), b...)
}
