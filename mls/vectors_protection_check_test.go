package mls

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// checkMessageProtection runs message-protection.json: for a proposal, a
// commit and application data sent by leaf 1 of a two-member group, the
// given PublicMessage and PrivateMessage must unprotect to the given
// content, and protecting the content here must give messages that
// unprotect again (§6).
func checkMessageProtection(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite             CipherSuite `json:"cipher_suite"`
		GroupID                 hexBytes    `json:"group_id"`
		Epoch                   uint64      `json:"epoch"`
		TreeHash                hexBytes    `json:"tree_hash"`
		ConfirmedTranscriptHash hexBytes    `json:"confirmed_transcript_hash"`
		SignaturePriv           hexBytes    `json:"signature_priv"`
		SignaturePub            hexBytes    `json:"signature_pub"`
		EncryptionSecret        hexBytes    `json:"encryption_secret"`
		SenderDataSecret        hexBytes    `json:"sender_data_secret"`
		MembershipKey           hexBytes    `json:"membership_key"`
		Proposal                hexBytes    `json:"proposal"`
		ProposalPub             hexBytes    `json:"proposal_pub"`
		ProposalPriv            hexBytes    `json:"proposal_priv"`
		Commit                  hexBytes    `json:"commit"`
		CommitPub               hexBytes    `json:"commit_pub"`
		CommitPriv              hexBytes    `json:"commit_priv"`
		Application             hexBytes    `json:"application"`
		ApplicationPriv         hexBytes    `json:"application_priv"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: message-protection.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			gc := &GroupContext{
				Version:                 ProtocolVersionMLS10,
				CipherSuite:             c.CipherSuite,
				GroupID:                 c.GroupID,
				Epoch:                   c.Epoch,
				TreeHash:                c.TreeHash,
				ConfirmedTranscriptHash: c.ConfirmedTranscriptHash,
			}
			newProtection := func() (*epochProtection, error) {
				tree, err := newSecretTree(s, bytes.Clone(c.EncryptionSecret), 2, secretTreeLimits{})
				if err != nil {
					return nil, err
				}
				return &epochProtection{
					s:                s,
					gc:               gc,
					membershipKey:    c.MembershipKey,
					senderDataSecret: c.SenderDataSecret,
					tree:             tree,
				}, nil
			}
			signer := func(fc *framedContent) ([]byte, error) {
				if fc.Sender.SenderType != SenderTypeMember || fc.Sender.LeafIndex != 1 {
					return nil, errors.New("unexpected sender")
				}
				return c.SignaturePub, nil
			}
			for _, m := range []struct {
				name      string
				ct        ContentType
				raw       []byte
				pub, priv []byte
			}{
				{"proposal", ContentTypeProposal, c.Proposal, c.ProposalPub, c.ProposalPriv},
				{"commit", ContentTypeCommit, c.Commit, c.CommitPub, c.CommitPriv},
				{"application", ContentTypeApplication, c.Application, nil, c.ApplicationPriv},
			} {
				fc := framedContent{
					GroupID:     c.GroupID,
					Epoch:       c.Epoch,
					Sender:      Sender{SenderType: SenderTypeMember, LeafIndex: 1},
					ContentType: m.ct,
				}
				switch m.ct {
				case ContentTypeProposal:
					fc.Proposal = new(Proposal)
					if err := unmarshal(m.raw, fc.Proposal); err != nil {
						return fmt.Errorf("%s: %w", m.name, err)
					}
				case ContentTypeCommit:
					fc.Commit = new(commitContent)
					if err := unmarshal(m.raw, fc.Commit); err != nil {
						return fmt.Errorf("%s: %w", m.name, err)
					}
				default:
					fc.ApplicationData = m.raw
				}
				sigPriv := padECDSAScalar(s, c.SignaturePriv)
				if err := checkProtectionCase(s, m.name, &fc, m.raw, m.pub, m.priv, sigPriv, newProtection, signer); err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
			}
			return nil
		})
	}
	return nil
}

// contentBytes returns the encoding of the content selected by the content
// type: the Proposal, the Commit, or the application data itself.
func contentBytes(fc *framedContent) []byte {
	switch fc.ContentType {
	case ContentTypeProposal:
		return marshal(orZero(fc.Proposal))
	case ContentTypeCommit:
		return marshal(orZero(fc.Commit))
	}
	return fc.ApplicationData
}

func checkProtectionCase(s suite, name string, fc *framedContent, raw, pubMsg, privMsg, sigPriv []byte,
	newProtection func() (*epochProtection, error), signer signerKey) error {
	decode := func(data []byte, wf WireFormat) (*mlsMessage, error) {
		var msg mlsMessage
		if err := unmarshal(data, &msg); err != nil {
			return nil, err
		}
		if msg.WireFormat != wf {
			return nil, fmt.Errorf("wire format %d, want %d", msg.WireFormat, wf)
		}
		return &msg, nil
	}
	checkContent := func(what string, ac *authenticatedContent) error {
		return expectEqual(what+" content", contentBytes(&ac.Content), raw)
	}
	p, err := newProtection()
	if err != nil {
		return err
	}

	// PublicMessage: the given one, then one of our own.
	ac, err := signFramedContent(s, sigPriv, WireFormatPublicMessage, fc, p.gc)
	if err != nil {
		return err
	}
	if fc.ContentType == ContentTypeCommit {
		ac.Auth.ConfirmationTag = s.mac([]byte("confirmation key"), p.gc.ConfirmedTranscriptHash)
	}
	if fc.ContentType == ContentTypeApplication {
		if _, err := p.protectPublic(ac); err == nil {
			return errors.New("application data was protected as a PublicMessage")
		}
	} else {
		msg, err := decode(pubMsg, WireFormatPublicMessage)
		if err != nil {
			return fmt.Errorf("given public message: %w", err)
		}
		got, err := p.unprotectPublic(msg.PublicMessage, signer)
		if err != nil {
			return fmt.Errorf("given public message: %w", err)
		}
		if err := checkContent("given public message", got); err != nil {
			return err
		}
		pm, err := p.protectPublic(ac)
		if err != nil {
			return err
		}
		msg, err = decode(marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage, PublicMessage: pm}), WireFormatPublicMessage)
		if err != nil {
			return err
		}
		got, err = p.unprotectPublic(msg.PublicMessage, signer)
		if err != nil {
			return fmt.Errorf("own public message: %w", err)
		}
		if err := checkContent("own public message", got); err != nil {
			return err
		}
	}

	// PrivateMessage: the given one, then one of our own, protected with
	// one secret tree and unprotected with a fresh one.
	msg, err := decode(privMsg, WireFormatPrivateMessage)
	if err != nil {
		return fmt.Errorf("given private message: %w", err)
	}
	got, err := p.unprotectPrivate(msg.PrivateMessage, signer)
	if err != nil {
		return fmt.Errorf("given private message: %w", err)
	}
	if err := checkContent("given private message", got); err != nil {
		return err
	}
	ac, err = signFramedContent(s, sigPriv, WireFormatPrivateMessage, fc, p.gc)
	if err != nil {
		return err
	}
	if fc.ContentType == ContentTypeCommit {
		ac.Auth.ConfirmationTag = s.mac([]byte("confirmation key"), p.gc.ConfirmedTranscriptHash)
	}
	sender, err := newProtection()
	if err != nil {
		return err
	}
	pm, err := sender.protectPrivate(ac)
	if err != nil {
		return err
	}
	msg, err = decode(marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm}), WireFormatPrivateMessage)
	if err != nil {
		return err
	}
	receiver, err := newProtection()
	if err != nil {
		return err
	}
	got, err = receiver.unprotectPrivate(msg.PrivateMessage, signer)
	if err != nil {
		return fmt.Errorf("own private message: %w", err)
	}
	if err := checkContent("own private message", got); err != nil {
		return err
	}
	if fc.ContentType == ContentTypeCommit && !bytes.Equal(got.Auth.ConfirmationTag, ac.Auth.ConfirmationTag) {
		return errors.New("own private message: confirmation tag changed")
	}
	return nil
}

// padECDSAScalar left-pads an ECDSA private scalar to the field length. One
// P-521 key in message-protection.json is written as a 65-byte integer with
// its leading zero byte dropped, while the suite takes the fixed-length
// Field-Element-to-Octet-String form.
func padECDSAScalar(s suite, priv []byte) []byte {
	cs, ok := s.(*cipherSuite)
	if !ok || cs.curve == nil {
		return priv
	}
	return leftPad(priv, (cs.curve.Params().BitSize+7)/8)
}
