package mls

import (
	"encoding/json"
	"fmt"
)

// checkMessages runs messages.json: every structure must decode and
// re-encode to the same bytes (RFC 9420, Sections 6 to 12).
func checkMessages(data []byte, r *vectorRun) error {
	var cases []map[string]hexBytes
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: messages.json: %w", err)
	}
	for i, c := range cases {
		for _, f := range messageFields {
			in, ok := c[f.name]
			r.runCase(fmt.Sprintf("%d/%s", i, f.name), func() error {
				if !ok {
					return fmt.Errorf("field %s missing", f.name)
				}
				return f.check(in)
			})
		}
	}
	return nil
}

// messageFields lists the fields of a messages.json case in file order.
var messageFields = []struct {
	name  string
	check func([]byte) error
}{
	{name: "mls_welcome", check: checkMLSMessage(WireFormatWelcome, 0)},
	{name: "mls_group_info", check: checkMLSMessage(WireFormatGroupInfo, 0)},
	{name: "mls_key_package", check: checkMLSMessage(WireFormatKeyPackage, 0)},
	{name: "ratchet_tree", check: checkRatchetTreeEncoding},
	{name: "group_secrets", check: roundTrip[welcomeSecrets]},
	{name: "add_proposal", check: roundTrip[Add]},
	{name: "update_proposal", check: roundTrip[Update]},
	{name: "remove_proposal", check: roundTrip[Remove]},
	{name: "pre_shared_key_proposal", check: roundTrip[PreSharedKey]},
	{name: "re_init_proposal", check: roundTrip[ReInit]},
	{name: "external_init_proposal", check: roundTrip[ExternalInit]},
	{name: "group_context_extensions_proposal", check: roundTrip[GroupContextExtensions]},
	{name: "commit", check: roundTrip[commitContent]},
	{name: "public_message_application", check: checkMLSMessage(WireFormatPublicMessage, ContentTypeApplication)},
	{name: "public_message_proposal", check: checkMLSMessage(WireFormatPublicMessage, ContentTypeProposal)},
	{name: "public_message_commit", check: checkMLSMessage(WireFormatPublicMessage, ContentTypeCommit)},
	{name: "private_message", check: checkMLSMessage(WireFormatPrivateMessage, 0)},
}

// roundTrip decodes in as a T and checks that it re-encodes to in.
func roundTrip[T any, P interface {
	*T
	marshal(*builder)
	unmarshal(*parser) bool
}](in []byte) error {
	_, err := roundTripValue[T, P](in)
	return err
}

func roundTripValue[T any, P interface {
	*T
	marshal(*builder)
	unmarshal(*parser) bool
}](in []byte) (*T, error) {
	v := new(T)
	if err := unmarshal(in, P(v)); err != nil {
		return nil, fmt.Errorf("decode %T: %w", v, err)
	}
	if err := expectEqual(fmt.Sprintf("re-encoded %T", v), marshal(P(v)), in); err != nil {
		return nil, err
	}
	return v, nil
}

// checkMLSMessage returns a check that in is an MLSMessage of wire format
// wf (and, for public messages, of content type ct) that round-trips.
func checkMLSMessage(wf WireFormat, ct ContentType) func([]byte) error {
	return func(in []byte) error {
		m, err := roundTripValue[mlsMessage](in)
		if err != nil {
			return err
		}
		if m.WireFormat != wf {
			return fmt.Errorf("wire_format %d, want %d", m.WireFormat, wf)
		}
		if ct != 0 && m.PublicMessage.Content.ContentType != ct {
			return fmt.Errorf("content_type %d, want %d", m.PublicMessage.Content.ContentType, ct)
		}
		return nil
	}
}

// checkRatchetTreeEncoding decodes in as a ratchet_tree extension value
// (Section 12.4.3.3) and checks that it re-encodes to in. The suite only
// matters for hashing, which decoding does not do.
func checkRatchetTreeEncoding(in []byte) error {
	s, err := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	if err != nil {
		return err
	}
	t, err := decodeRatchetTree(s, in)
	if err != nil {
		return fmt.Errorf("decode ratchet_tree: %w", err)
	}
	return expectEqual("re-encoded ratchet_tree", t.encode(), in)
}
