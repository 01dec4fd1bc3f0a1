package mls

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets check two properties of every decoder: it never panics,
// and whatever it accepts re-encodes to exactly the input bytes, so there
// is only one encoding of each value (no malleability).

// messageSeeds returns the messages.json values of the given fields, when
// the vectors are available.
func messageSeeds(f *testing.F, fields ...string) [][]byte {
	dir := os.Getenv("MLS_VECTORS_DIR")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil
		}
		dir = filepath.Join(wd, "..", "..", "shared", "mls-vectors")
	}
	data, err := os.ReadFile(filepath.Join(dir, "messages.json"))
	if err != nil {
		return nil
	}
	var cases []map[string]hexBytes
	if err := json.Unmarshal(data, &cases); err != nil {
		f.Fatal(err)
	}
	var seeds [][]byte
	for i, c := range cases {
		if i >= 20 { // a handful of cases covers every shape
			break
		}
		for _, name := range fields {
			seeds = append(seeds, c[name])
		}
	}
	return seeds
}

func fuzzRoundTrip[T any, P interface {
	*T
	marshal(*builder)
	unmarshal(*parser) bool
}](f *testing.F, seeds [][]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v := new(T)
		if err := unmarshal(in, P(v)); err != nil {
			return
		}
		if out := marshal(P(v)); !bytes.Equal(out, in) {
			t.Fatalf("%T: re-encoding differs\n in: %x\nout: %x", v, in, out)
		}
	})
}

// handmade returns small encodings that reach the decoders' edge cases.
func handmade() [][]byte {
	leaf := LeafNode{
		EncryptionKey: []byte{1}, SignatureKey: []byte{2},
		Credential:     Credential{CredentialType: CredentialTypeX509, Certificates: [][]byte{{3}, {}}},
		Capabilities:   Capabilities{Versions: []ProtocolVersion{1}, Extensions: []ExtensionType{0x0a0a}},
		LeafNodeSource: LeafNodeSourceCommit, ParentHash: []byte{4},
		Extensions: []Extension{{ExtensionType: 0x0a0a}}, Signature: []byte{5},
	}
	commit := commitContent{
		Proposals: []proposalOrRef{
			{Type: porReference, Reference: []byte{6}},
			{Type: porProposal, Proposal: Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: 7}}},
		},
		Path: &updatePath{LeafNode: leaf, Nodes: []updatePathNode{{EncryptionKey: []byte{8}, EncryptedPathSecret: []hpkeCiphertext{{}}}}},
	}
	msg := mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage, PublicMessage: &publicMessage{
		Content: framedContent{Sender: Sender{SenderType: SenderTypeMember}, ContentType: ContentTypeCommit, Commit: &commit},
		Auth:    framedContentAuthData{Signature: []byte{9}, ConfirmationTag: []byte{10}},
	}}
	return [][]byte{nil, {0}, {0x40, 0x00}, marshal(&leaf), marshal(&commit), marshal(&msg)}
}

func FuzzMLSMessage(f *testing.F) {
	seeds := messageSeeds(f, "mls_welcome", "mls_group_info", "mls_key_package",
		"public_message_application", "public_message_proposal", "public_message_commit", "private_message")
	fuzzRoundTrip[mlsMessage](f, append(seeds, handmade()...))
}

func FuzzKeyPackage(f *testing.F) {
	var seeds [][]byte
	for _, s := range messageSeeds(f, "mls_key_package") {
		seeds = append(seeds, s[4:]) // strip version and wire_format
	}
	fuzzRoundTrip[KeyPackage](f, append(seeds, handmade()...))
}

func FuzzWelcome(f *testing.F) {
	var seeds [][]byte
	for _, s := range messageSeeds(f, "mls_welcome") {
		seeds = append(seeds, s[4:])
	}
	fuzzRoundTrip[welcomeMessage](f, append(seeds, handmade()...))
}

func FuzzGroupInfo(f *testing.F) {
	var seeds [][]byte
	for _, s := range messageSeeds(f, "mls_group_info") {
		seeds = append(seeds, s[4:])
	}
	fuzzRoundTrip[GroupInfo](f, append(seeds, handmade()...))
}

func FuzzCommit(f *testing.F) {
	fuzzRoundTrip[commitContent](f, append(messageSeeds(f, "commit"), handmade()...))
}

func FuzzProposal(f *testing.F) {
	var seeds [][]byte
	types := map[string]ProposalType{
		"add_proposal": ProposalTypeAdd, "update_proposal": ProposalTypeUpdate,
		"remove_proposal": ProposalTypeRemove, "pre_shared_key_proposal": ProposalTypePSK,
		"re_init_proposal": ProposalTypeReInit, "external_init_proposal": ProposalTypeExternalInit,
		"group_context_extensions_proposal": ProposalTypeGroupContextExtensions,
	}
	for name, t := range types {
		for _, s := range messageSeeds(f, name) {
			var b builder
			b.u16(uint16(t))
			b.raw(s)
			seeds = append(seeds, b.bytes())
		}
	}
	fuzzRoundTrip[Proposal](f, append(seeds, handmade()...))
}

func FuzzLeafNode(f *testing.F) {
	// An Update proposal's body is exactly a LeafNode.
	fuzzRoundTrip[LeafNode](f, append(messageSeeds(f, "update_proposal"), handmade()...))
}

func FuzzGroupSecrets(f *testing.F) {
	fuzzRoundTrip[welcomeSecrets](f, append(messageSeeds(f, "group_secrets"), handmade()...))
}

// FuzzPrivateMessageContent covers the content-type dependent decoders
// and the padding rule, and that the body kept for signatures and
// transcript hashes is exactly the encoding of the fields decoded.
func FuzzPrivateMessageContent(f *testing.F) {
	for _, s := range handmade() {
		f.Add(uint8(3), s)
	}
	f.Add(uint8(1), []byte{0x01, 0xaa, 0x00, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, ct uint8, in []byte) {
		var v privateMessageContent
		p := newParser(in)
		if !v.unmarshal(p, ContentType(ct)) || !p.empty() {
			return
		}
		var b builder
		v.marshal(&b, ContentType(ct))
		if !bytes.Equal(b.bytes(), in) {
			t.Fatalf("re-encoding differs\n in: %x\nout: %x", in, b.bytes())
		}
		var c builder
		marshalContent(&c, ContentType(ct), v.ApplicationData, v.Proposal, v.Commit)
		if !bytes.Equal(c.bytes(), v.body) {
			t.Fatalf("kept body differs from the decoded content\nbody: %x\n enc: %x", v.body, c.bytes())
		}
	})
}

type wireStruct interface {
	marshal(*builder)
	unmarshal(*parser) bool
}

// allWireStructs makes one empty value of every context-free wire
// structure.
var allWireStructs = []func() wireStruct{
	func() wireStruct { return new(Credential) },
	func() wireStruct { return new(Extension) },
	func() wireStruct { return new(ApplicationID) },
	func() wireStruct { return new(requiredCapabilities) },
	func() wireStruct { return new(ExternalPub) },
	func() wireStruct { return new(externalSenders) },
	func() wireStruct { return new(Capabilities) },
	func() wireStruct { return new(Lifetime) },
	func() wireStruct { return new(PreSharedKeyID) },
	func() wireStruct { return new(proposalOrRef) },
	func() wireStruct { return new(hpkeCiphertext) },
	func() wireStruct { return new(updatePathNode) },
	func() wireStruct { return new(updatePath) },
	func() wireStruct { return new(GroupContext) },
	func() wireStruct { return new(pathSecretMsg) },
	func() wireStruct { return new(encryptedGroupSecrets) },
	func() wireStruct { return new(Sender) },
	func() wireStruct { return new(framedContent) },
	func() wireStruct { return new(framedContentToSign) },
	func() wireStruct { return new(authenticatedContent) },
	func() wireStruct { return new(publicMessage) },
	func() wireStruct { return new(privateMessage) },
	func() wireStruct { return new(senderData) },
	func() wireStruct { return new(senderDataAAD) },
	func() wireStruct { return new(privateContentAAD) },
	func() wireStruct { return new(ExternalSender) },
	func() wireStruct { return new(parentNodeData) },
	func() wireStruct { return new(treeNode) },
	func() wireStruct { return new(Add) },
	func() wireStruct { return new(Update) },
	func() wireStruct { return new(Remove) },
	func() wireStruct { return new(PreSharedKey) },
	func() wireStruct { return new(ReInit) },
	func() wireStruct { return new(ExternalInit) },
	func() wireStruct { return new(GroupContextExtensions) },
}

// FuzzWireStructs covers every other wire structure, chosen by the first
// input.
func FuzzWireStructs(f *testing.F) {
	for i := range allWireStructs {
		for _, s := range handmade() {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, in []byte) {
		v := allWireStructs[int(kind)%len(allWireStructs)]()
		if err := unmarshal(in, v); err != nil {
			return
		}
		if out := marshal(v); !bytes.Equal(out, in) {
			t.Fatalf("%T: re-encoding differs\n in: %x\nout: %x", v, in, out)
		}
	})
}
