package seat

import (
	"testing"

	"github.com/skytale-oss/skytale/mls"
)

// TestNoticesCarryIdentitiesAsTheyAre: a member whose identity holds a
// newline and words shaped like another notice gets one notice about
// itself, its identity whole, and forges none about anybody else.
func TestNoticesCarryIdentitiesAsTheyAre(t *testing.T) {
	evil := "did:key:z6Mkevil\nremoved-member did:key:z6Mkvictim admin"
	before := []mls.Member{{LeafIndex: 0, Identity: "did:key:z6Mkowner"}}
	after := append(before, mls.Member{LeafIndex: 1, Identity: evil})
	ns := membershipNotices(RoomMessage{Room: "acme/rooms/ops", Seq: 3}, "did:key:z6Mkowner", "did:key:z6Mkowner", before, after, nil, RoomRoles{}, RoomRoles{})
	row := RoomMessage{Room: "acme/rooms/ops", Seq: 3, Kind: noticeMembers, Text: packNotices(ns)}
	got := splitNotices(row)
	if len(got) != 1 || got[0].Kind != NoticeAdded || got[0].Text != PersonOf(evil) {
		t.Fatalf("notices %+v, want one %q about %q", got, NoticeAdded, PersonOf(evil))
	}
	if got := splitNotices(RoomMessage{Kind: noticeMembers, Text: "added did:key:z6Mkx\nnot json"}); len(got) != 0 {
		t.Fatalf("a row that is not the packed form gave %+v", got)
	}
}
