package acl

import (
	"math/big"
	"slices"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// FuzzCheck asserts invariants of every decision over arbitrary actors,
// entries and operations.
func FuzzCheck(f *testing.F) {
	f.Add(uint8(0), uint8(4), uint8(1), uint8(1), false, true)
	f.Add(uint8(1), uint8(5), uint8(3), uint8(2), true, false)
	f.Add(uint8(2), uint8(3), uint8(2), uint8(9), false, false)
	f.Fuzz(func(t *testing.T, who, kind, mode, op uint8, isDir, isRoot bool) {
		users := []string{"alice", "bob", ""}
		a := Actor{User: users[int(who)%3], Groups: []string{"g"}}
		principal := ""
		if kind%6 != uint8(shedfs.ZoneShare) {
			principal = []string{"alice", "g", "bob"}[int(who/3)%3]
		}
		e := Entry{
			Zone:  shedfs.Zone{Kind: shedfs.ZoneKind(kind % 7), Principal: principal},
			Owner: users[int(who/9)%3],
			Mode:  shedfs.OwnMode(mode % 5),
			Dir:   isDir,
			Root:  isRoot,
		}
		o := Op(op % 14)
		d := Check(a, o, e)
		if (d.Errno == 0) != (d.Reason == "") {
			t.Fatalf("errno/reason mismatch %+v", d)
		}
		if d.Reason != "" && !slices.Contains(Reasons(), d.Reason) {
			t.Fatalf("unlisted reason %q", d.Reason)
		}
		vis := zones.Visible(a.User, a.Groups, e.Zone)
		if !vis && d.Allowed() {
			t.Fatalf("allowed %v on invisible %+v for %+v", o, e, a)
		}
		if vis && o == OpRead && !d.Allowed() {
			t.Fatalf("read of visible %+v denied: %v", e, d)
		}
		if !d.Allowed() || !vis {
			return
		}
		em := zones.EffectiveMode(e.Zone.Kind, e.Mode)
		switch {
		case e.Zone.Kind == shedfs.ZoneUploads && o != OpRead && o != OpUnlink && o != OpRmdir:
			t.Fatalf("uploads allowed %v", o)
		case em == shedfs.OwnModeOwnerRO && o != OpRead && !(o == OpSetMode && a.User == e.Owner && a.User != ""):
			t.Fatalf("owner_ro allowed %v by %q (owner %q)", o, a.User, e.Owner)
		case em == shedfs.OwnModeOwner && o != OpRead && o != OpCreate && o != OpSymlink && a.User != e.Owner:
			t.Fatalf("owner mode allowed %v by non-owner", o)
		case (o == OpSetMode || o == OpSetOwner) && (a.User != e.Owner || em == shedfs.OwnModeNone):
			t.Fatalf("%v allowed for %q on %+v", o, a.User, e)
		case o == OpSetZoneXattr:
			t.Fatal("zone xattr set")
		}
	})
}

// FuzzAdmit asserts that admission never lets usage pass a limit, computed
// without overflow.
func FuzzAdmit(f *testing.F) {
	f.Add(int64(0), int64(10), int64(5))
	f.Add(int64(1<<62), int64(1<<62), int64(1<<62))
	f.Add(int64(20), int64(10), int64(-5))
	f.Fuzz(func(t *testing.T, used, limit, delta int64) {
		if used < 0 {
			used = -(used + 1)
		}
		d := AdmitBytes(shedfs.Usage{Bytes: used}, shedfs.Limit{Bytes: limit}, delta)
		sum := new(big.Int).Add(big.NewInt(used), big.NewInt(delta))
		overLimit := limit > 0 && delta > 0 && sum.Cmp(big.NewInt(limit)) > 0
		if overLimit != !d.Allowed() {
			t.Fatalf("AdmitBytes(%d, %d, %d) = %v", used, limit, delta, d)
		}
		if !d.Allowed() && (d.Errno != syscall.EDQUOT || d.Reason != ReasonQuotaBytes) {
			t.Fatalf("bad denial %+v", d)
		}
		i := AdmitInodes(shedfs.Usage{Inodes: used}, shedfs.Limit{Inodes: limit}, delta)
		if i.Allowed() != d.Allowed() {
			t.Fatal("AdmitInodes disagrees with AdmitBytes")
		}
	})
}
