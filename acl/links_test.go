package acl

import (
	"syscall"
	"testing"
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
