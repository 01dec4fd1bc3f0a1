package mls

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
)

// checkTranscriptHashes runs transcript-hashes.json: the confirmation tag of
// a Commit and the confirmed and interim transcript hashes it yields (§8.2).
func checkTranscriptHashes(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite                  CipherSuite `json:"cipher_suite"`
		ConfirmationKey              hexBytes    `json:"confirmation_key"`
		AuthenticatedContent         hexBytes    `json:"authenticated_content"`
		InterimTranscriptHashBefore  hexBytes    `json:"interim_transcript_hash_before"`
		ConfirmedTranscriptHashAfter hexBytes    `json:"confirmed_transcript_hash_after"`
		InterimTranscriptHashAfter   hexBytes    `json:"interim_transcript_hash_after"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: transcript-hashes.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			var ac authenticatedContent
			if err := unmarshal(c.AuthenticatedContent, &ac); err != nil {
				return err
			}
			if ac.Content.ContentType != ContentTypeCommit {
				return errors.New("authenticated_content is not a commit")
			}
			tag := s.mac(c.ConfirmationKey, c.ConfirmedTranscriptHashAfter)
			if !hmac.Equal(tag, ac.Auth.ConfirmationTag) {
				return fmt.Errorf("confirmation_tag: computed %x, vector has %x", tag, ac.Auth.ConfirmationTag)
			}
			confirmed, err := confirmedTranscriptHash(s, c.InterimTranscriptHashBefore, &ac)
			if err != nil {
				return err
			}
			if err := expectEqual("confirmed_transcript_hash_after", confirmed, c.ConfirmedTranscriptHashAfter); err != nil {
				return err
			}
			interim := interimTranscriptHash(s, confirmed, ac.Auth.ConfirmationTag)
			return expectEqual("interim_transcript_hash_after", interim, c.InterimTranscriptHashAfter)
		})
	}
	return nil
}
