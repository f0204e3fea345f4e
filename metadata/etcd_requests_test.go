package metadata

import (
	"testing"

	"github.com/shedfs/shedfs"
)

// TestEtcdRoundTripsPerChange counts the requests single changes send to
// etcd once the cache knows what they read: one transaction each, no
// read, and no failed compare. A name that was removed and is created
// again is the case that used to fail: the cache kept the deleted entry
// with the revision of its delete, where etcd compares an absent key's
// revision as 0, so the create's first commit always failed and it ran
// again reading everything from etcd.
func TestEtcdRoundTripsPerChange(t *testing.T) {
	s, err := OpenEtcd(testEtcd(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	root := s.ShareRoot()
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	f := must[*shedfs.Inode](t)(s.Create(d.Ino, "f", file(0o644), nil))
	must[*shedfs.Inode](t)(s.GetInode(f.Ino))
	must[*shedfs.Inode](t)(s.Create(d.Ino, "warm", file(0o644), nil)) // the parent's usage and the directory are cached

	cost := func(what string, fn func()) {
		t.Helper()
		before := s.EngineRequests()
		fn()
		after := s.EngineRequests()
		for kind, n := range after {
			got := n - before[kind]
			want := uint64(0)
			if kind == "Txn" {
				want = 1
			}
			if got != want {
				t.Errorf("%s: %d %s requests, want %d (all: %v -> %v)", what, got, kind, want, before, after)
			}
		}
	}
	cost("chmod", func() {
		must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Mode = n.Mode&^0o777 | 0o600; return nil }, nil))
	})
	cost("unlink", func() { must[*shedfs.Inode](t)(s.Unlink(d.Ino, "f", false)) })
	cost("create again", func() { must[*shedfs.Inode](t)(s.Create(d.Ino, "f", file(0o644), nil)) })
}
