package acl

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs/zones"
)

func TestTrashRules(t *testing.T) {
	bobOwned := file(share, "bob", owner)
	tests := []struct {
		name string
		d    Decision
		want syscall.Errno
		why  string
	}{
		{"read own", TrashRead(alice, alicePriv), 0, ""},
		{"read another's private", TrashRead(alice, bobPriv), syscall.ENOENT, ReasonNotVisible},
		{"read team as non-member", TrashRead(carol, file(team, "alice", group)), syscall.EACCES, ReasonNotMember},
		{"change", TrashChange(), syscall.EACCES, ReasonTrashReadonly},
		{"purge group-mode", TrashPurge(alice, file(share, "bob", group)), 0, ""},
		{"purge another's owner file", TrashPurge(alice, bobOwned), syscall.EPERM, ReasonOwnerOnly},
		{"purge own owner file", TrashPurge(bob, bobOwned), 0, ""},
		{"purge owner_ro", TrashPurge(bob, file(share, "bob", ownerRO)), syscall.EPERM, ReasonOwnerRO},
		{"purge upload", TrashPurge(alice, uploadsFile), 0, ""},
		{"purge team as non-member", TrashPurge(carol, file(team, "alice", group)), syscall.EACCES, ReasonNotMember},
		{"restore group-mode", TrashRestore(alice, file(share, "bob", group), shareDir, "f", nil), 0, ""},
		{"restore across zones", TrashRestore(alice, file(share, "bob", group), teamDir, "f", nil), syscall.EXDEV, ReasonCrossZone},
		{"restore another's owner file", TrashRestore(alice, bobOwned, shareDir, "f", nil), syscall.EPERM, ReasonOwnerOnly},
		{"restore own owner file", TrashRestore(bob, bobOwned, shareRoot, "f", nil), 0, ""},
		{"restore owner_ro", TrashRestore(bob, file(share, "bob", ownerRO), shareRoot, "f", nil), syscall.EPERM, ReasonOwnerRO},
		{"restore into owner dir of another", TrashRestore(bob, bobOwned, dir(share, "alice", owner), "f", nil), syscall.EACCES, ReasonDirMode},
		{"restore over another's owner file", TrashRestore(alice, file(share, "alice", owner), shareRoot, "f", ptr(bobOwned)), syscall.EPERM, ReasonOwnerOnly},
		{"restore into uploads", TrashRestore(alice, uploadsFile, uploadsRoot, "f", nil), syscall.EACCES, ReasonUploadsReadonly},
		{"restore onto a reserved name", TrashRestore(alice, alicePriv, aliceRoot, zones.NameTrash, nil), syscall.EEXIST, ReasonReservedName},
		{"restore with a bad name", TrashRestore(alice, alicePriv, aliceRoot, "a/b", nil), syscall.EINVAL, ReasonBadName},
		{"restore another's private", TrashRestore(alice, bobPriv, aliceRoot, "f", nil), syscall.ENOENT, ReasonNotVisible},
	}
	for _, tt := range tests {
		if tt.d.Errno != tt.want || tt.d.Reason != tt.why {
			t.Errorf("%s: %v %q, want %v %q", tt.name, tt.d.Errno, tt.d.Reason, tt.want, tt.why)
		}
	}
}
