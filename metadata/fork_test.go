package metadata

import (
	"fmt"
	"os"
	"path"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/internal/etcdtest"
)

// TestForkTree forks a tree of 1,300 entries (several transactions; on
// etcd with its default --max-txn-ops, halved until they fit) into a
// session: every entry
// is made where its path says, a hard link stays one inode with two
// names, the session and its user are charged as for a copy, and each
// file joins its source's fork group.
func TestForkTree(t *testing.T) {
	s := newStore(t)
	if os.Getenv("SHEDFS_TEST_META") == "etcd" {
		// etcd's own default limit: a batch of 512 entries is halved
		// down to what fits.
		c := etcdtest.StartLimited(t, 1, 128)
		s = must[*Store](t)(OpenEtcd(EtcdConfig{Endpoints: c.Endpoints(), Prefix: "test/"}, Options{}))
		t.Cleanup(func() { s.Close() })
	}
	if _, err := s.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	ss, err := s.OpenSession("alice", "f", time.Time{}, shedfs.Limit{})
	if err != nil {
		t.Fatal(err)
	}
	var es []SnapEntry
	es = append(es, SnapEntry{Path: "", Ino: 1, Mode: syscall.S_IFDIR | 0o755})
	src := uint64(1000)
	for d := 0; d < 13; d++ {
		dir := fmt.Sprintf("d%02d", d)
		src++
		es = append(es, SnapEntry{Path: dir, Ino: src, Mode: syscall.S_IFDIR | 0o750})
		for f := 0; f < 99; f++ {
			src++
			es = append(es, SnapEntry{Path: path.Join(dir, fmt.Sprintf("f%02d", f)), Ino: src, Mode: syscall.S_IFREG | 0o640, Size: 10})
		}
	}
	es = append(es, SnapEntry{Path: "d12/link", Ino: src, Mode: syscall.S_IFREG | 0o640, Size: 10})
	es = append(es, SnapEntry{Path: "sym", Ino: 1, Mode: syscall.S_IFLNK | 0o777, Target: "d00/f00"})
	inos, err := s.AllocInos(len(es))
	if err != nil {
		t.Fatal(err)
	}
	fes := make([]ForkEntry, len(es))
	for i, e := range es {
		fes[i] = ForkEntry{SnapEntry: e, Ino: inos[i]}
	}
	h := shedfs.SessionHolder("alice", "f")
	before, _ := s.Usage(h)
	userBefore, _ := s.Usage(shedfs.UserHolder("alice"))
	if err := s.ForkTree(ss.Root, "alice", fes, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Usage(h)
	userAfter, _ := s.Usage(shedfs.UserHolder("alice"))
	files := int64(13 * 99)
	if after.Inodes-before.Inodes != files+13+1 || after.Bytes-before.Bytes != files*shedfs.Charge(10) {
		t.Errorf("session charged %+v -> %+v", before, after)
	}
	if userAfter.Bytes-userBefore.Bytes != after.Bytes-before.Bytes {
		t.Errorf("the user charged %d bytes, the session %d", userAfter.Bytes-userBefore.Bytes, after.Bytes-before.Bytes)
	}
	lookup := func(p string) *shedfs.Inode {
		t.Helper()
		ino := ss.Root
		var n *shedfs.Inode
		for _, name := range splitPath(p) {
			var err error
			if n, err = s.Lookup(ino, name); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			ino = n.Ino
		}
		return n
	}
	if n := lookup("d07/f42"); n.Size != 10 || n.Mode != syscall.S_IFREG|0o640 || n.Zone != shedfs.SessionZone("alice", "f") {
		t.Errorf("d07/f42: %+v", n)
	}
	if d := lookup("d03"); d.Nlink != 2 || d.Mode != syscall.S_IFDIR|0o750 {
		t.Errorf("d03: %+v", d)
	}
	a, b := lookup("d12/f98"), lookup("d12/link")
	if a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("hard link: %+v %+v", a, b)
	}
	if l := lookup("sym"); l.Target != "d00/f00" {
		t.Errorf("sym: %+v", l)
	}
	g, err := s.ForkGroup(a.Ino)
	if err != nil || len(g) != 1 || g[0] != src {
		t.Errorf("fork group of d12/f98: %v %v, want [%d]", g, err, src)
	}
	if g, err := s.ForkGroup(src); err != nil || len(g) != 1 || g[0] != a.Ino {
		t.Errorf("fork group of the source: %v %v, want [%d]", g, err, a.Ino)
	}
}

func splitPath(p string) []string {
	var out []string
	for p != "" && p != "." {
		out = append([]string{path.Base(p)}, out...)
		p = path.Dir(p)
	}
	return out
}
