package acl

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// Share by link: a link opens what its maker can read now.
func TestShareLink(t *testing.T) {
	bobOutside := Actor{User: "bob"} // bob after leaving team-alpha
	run(t, []row{
		{"own_private", ShareLink(alice, alicePriv), 0, ""},
		{"own_output_root", ShareLink(alice, aliceOut), 0, ""},
		{"uploads_read_only_zone", ShareLink(alice, uploadsFile), 0, ""},
		{"share", ShareLink(carol, shareDir), 0, ""},
		{"group_member", ShareLink(bob, teamDir), 0, ""},
		{"group_left", ShareLink(bobOutside, teamDir), syscall.EACCES, ReasonNotMember},
		{"other_private", ShareLink(alice, bobPriv), syscall.ENOENT, ReasonNotVisible},
		{"groups_dir", ShareLink(alice, GroupsDir()), syscall.EPERM, ReasonXattrReadonly},
		{"new_link", NewLink(alice, alicePriv, Linkable{Named: true}), 0, ""},
		{"new_link_pending", NewLink(alice, alicePriv, Linkable{Named: true, Content: shedfs.Content{State: shedfs.ScanPending}}), 0, ""},
		{"new_link_kept_in_trash", NewLink(alice, alicePriv, Linkable{}), syscall.EACCES, ReasonLinkUnnamed},
		{"new_link_quarantined", NewLink(alice, alicePriv, Linkable{Named: true, Content: shedfs.Content{State: shedfs.ScanInfected}}), syscall.EACCES, ReasonInfected},
		{"new_link_not_visible_first", NewLink(alice, bobPriv, Linkable{}), syscall.ENOENT, ReasonNotVisible},
		{"ttl_ok", SetLinkTTL(alice, alicePriv, true), 0, ""},
		{"ttl_bad_value", SetLinkTTL(alice, alicePriv, false), syscall.EINVAL, ReasonXattrBadValue},
		{"ttl_not_member_first", SetLinkTTL(carol, teamDir, false), syscall.EACCES, ReasonNotMember},
	})
	for _, n := range []string{XattrLink, XattrLinkTTL} {
		if !IsLinkXattr(n) || !IsShedfsXattr(n) {
			t.Errorf("%s: not a link xattr", n)
		}
	}
	if IsLinkXattr(XattrLink + ".other") {
		t.Error("user.shedfs.link.other taken for a link xattr")
	}
}
