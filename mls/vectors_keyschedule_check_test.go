package mls

import (
	"encoding/json"
	"fmt"
)

// checkKeySchedule runs key-schedule.json: a chain of epochs through the §8
// key schedule, comparing the GroupContext encoding and every derived
// secret, external_pub and one exporter output per epoch.
func checkKeySchedule(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite       CipherSuite `json:"cipher_suite"`
		GroupID           hexBytes    `json:"group_id"`
		InitialInitSecret hexBytes    `json:"initial_init_secret"`
		Epochs            []struct {
			TreeHash                hexBytes `json:"tree_hash"`
			CommitSecret            hexBytes `json:"commit_secret"`
			PSKSecret               hexBytes `json:"psk_secret"`
			ConfirmedTranscriptHash hexBytes `json:"confirmed_transcript_hash"`
			GroupContext            hexBytes `json:"group_context"`
			JoinerSecret            hexBytes `json:"joiner_secret"`
			WelcomeSecret           hexBytes `json:"welcome_secret"`
			InitSecret              hexBytes `json:"init_secret"`
			SenderDataSecret        hexBytes `json:"sender_data_secret"`
			EncryptionSecret        hexBytes `json:"encryption_secret"`
			ExporterSecret          hexBytes `json:"exporter_secret"`
			EpochAuthenticator      hexBytes `json:"epoch_authenticator"`
			ExternalSecret          hexBytes `json:"external_secret"`
			ConfirmationKey         hexBytes `json:"confirmation_key"`
			MembershipKey           hexBytes `json:"membership_key"`
			ResumptionPSK           hexBytes `json:"resumption_psk"`
			ExternalPub             hexBytes `json:"external_pub"`
			Exporter                struct {
				Label   string   `json:"label"`
				Context hexBytes `json:"context"`
				Length  int      `json:"length"`
				Secret  hexBytes `json:"secret"`
			} `json:"exporter"`
		} `json:"epochs"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: key-schedule.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			init, err := newInitSecret(s, append([]byte(nil), c.InitialInitSecret...))
			if err != nil {
				return err
			}
			for n, e := range c.Epochs {
				gc := &GroupContext{Version: ProtocolVersionMLS10,
					CipherSuite:             c.CipherSuite,
					GroupID:                 c.GroupID,
					Epoch:                   uint64(n),
					TreeHash:                e.TreeHash,
					ConfirmedTranscriptHash: e.ConfirmedTranscriptHash,
				}
				check := func(what string, got, want []byte) error {
					return expectEqual(fmt.Sprintf("epoch %d %s", n, what), got, want)
				}
				if err := check("group_context", marshal(gc), e.GroupContext); err != nil {
					return err
				}
				joiner, err := init.joiner(e.CommitSecret, gc)
				if err != nil {
					return err
				}
				if err := check("joiner_secret", joiner.bytes(), e.JoinerSecret); err != nil {
					return err
				}
				member, err := joiner.withPSK(e.PSKSecret)
				if err != nil {
					return err
				}
				welcome, err := member.welcomeSecret()
				if err != nil {
					return err
				}
				if err := check("welcome_secret", welcome, e.WelcomeSecret); err != nil {
					return err
				}
				es, err := member.epoch(gc)
				if err != nil {
					return err
				}
				for _, f := range []struct {
					name      string
					got, want []byte
				}{
					{"sender_data_secret", es.senderDataSecret, e.SenderDataSecret},
					{"encryption_secret", es.encryptionSecret, e.EncryptionSecret},
					{"exporter_secret", es.exporterSecret, e.ExporterSecret},
					{"epoch_authenticator", es.epochAuthenticator, e.EpochAuthenticator},
					{"external_secret", es.externalSecret, e.ExternalSecret},
					{"confirmation_key", es.confirmationKey, e.ConfirmationKey},
					{"membership_key", es.membershipKey, e.MembershipKey},
					{"resumption_psk", es.resumptionPSK, e.ResumptionPSK},
					{"init_secret", es.initSecret, e.InitSecret},
				} {
					if err := check(f.name, f.got, f.want); err != nil {
						return err
					}
				}
				_, pub, err := es.externalKeyPair()
				if err != nil {
					return err
				}
				if err := check("external_pub", pub, e.ExternalPub); err != nil {
					return err
				}
				out, err := es.export(e.Exporter.Label, e.Exporter.Context, e.Exporter.Length)
				if err != nil {
					return err
				}
				if err := check("exporter secret", out, e.Exporter.Secret); err != nil {
					return err
				}
				if init, err = es.nextInit(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return nil
}

// checkPSKSecret runs psk_secret.json: psk_secret (§8.4) over lists of
// external PSKs.
func checkPSKSecret(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite CipherSuite `json:"cipher_suite"`
		PSKs        []struct {
			PSKID    hexBytes `json:"psk_id"`
			PSK      hexBytes `json:"psk"`
			PSKNonce hexBytes `json:"psk_nonce"`
		} `json:"psks"`
		PSKSecret hexBytes `json:"psk_secret"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: psk_secret.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d/psks-%d", i, c.CipherSuite, len(c.PSKs)), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			ids := make([]PreSharedKeyID, len(c.PSKs))
			psks := make([][]byte, len(c.PSKs))
			for j, p := range c.PSKs {
				ids[j] = PreSharedKeyID{PSKType: PSKTypeExternal, PSKID: p.PSKID, PSKNonce: p.PSKNonce}
				psks[j] = p.PSK
			}
			got, err := pskSecret(s, ids, psks)
			if err != nil {
				return err
			}
			return expectEqual("psk_secret", got, c.PSKSecret)
		})
	}
	return nil
}
