package metadata

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/internal/etcdtest"
)

// The metadata tests share one 3-member etcd cluster, started on first use
// and stopped by TestMain; each test gets a key prefix of its own.
var (
	etcdOnce     sync.Once
	etcdCluster  *etcdtest.Cluster
	etcdErrStart error
	etcdSeq      atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if etcdCluster != nil {
		etcdCluster.Stop()
	}
	os.Exit(code)
}

// testEtcd returns the config of a fresh, empty store prefix on the shared
// cluster. Without etcd installed it fails under CI=true and skips
// otherwise.
func testEtcd(t *testing.T) EtcdConfig {
	t.Helper()
	if !etcdtest.Available() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: .ci/run installs Debian's etcd-server", etcdtest.Binary)
		}
		t.Skipf("%s is missing (apt-get install etcd-server)", etcdtest.Binary)
	}
	etcdOnce.Do(func() { etcdCluster, etcdErrStart = etcdtest.StartShared(3) })
	if etcdErrStart != nil {
		t.Fatalf("start etcd: %v", etcdErrStart)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return EtcdConfig{
		Endpoints: etcdCluster.Endpoints(),
		Prefix:    fmt.Sprintf("test/%s-%d/", name, etcdSeq.Add(1)),
	}
}

// TestEtcdDaemons: several processes have an etcd store open for writing
// at once, each registered under its own lease; each sees the others as
// peers, and a registration goes with its Close.
func TestEtcdDaemons(t *testing.T) {
	cfg := testEtcd(t)
	a, err := OpenEtcd(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenEtcd(cfg, Options{})
	if err != nil {
		t.Fatalf("second open for writing: %v", err)
	}
	if p, err := a.Peers(); err != nil || len(p) != 1 {
		t.Fatalf("peers of a: %q %v, want b", p, err)
	}
	ro, err := OpenEtcd(cfg, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open beside writers: %v", err)
	}
	ro.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Peers(); err != nil || len(p) != 0 {
		t.Fatalf("peers of a after b closed: %q %v", p, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestParseMetaURL(t *testing.T) {
	for _, tc := range []struct {
		in, eps, prefix, err string
	}{
		{"etcd://h1:2379,h2:2380/shedfs", "[h1:2379 h2:2380]", "shedfs/", ""},
		{"etcd://h1/a/b/", "[h1:2379]", "a/b/", ""},
		{"etcd://h1:2379", "", "", "needs a key prefix"},
		{"etcd://h1:2379/", "", "", "needs a key prefix"},
		{"http://h1/x", "", "", "only etcd://"},
		{"etcd://u:p@h1/x", "", "", "credentials"},
		{"etcd://h1,,h2/x", "", "", "empty host"},
	} {
		cfg, err := ParseMetaURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(cfg.Endpoints) != tc.eps || cfg.Prefix != tc.prefix {
			t.Errorf("%s: %v %q %v", tc.in, cfg.Endpoints, cfg.Prefix, err)
		}
	}
}

// TestMigrateToEtcd: a store copied to etcd reads the same, opens clean,
// passes a check, and a second copy to the same prefix is refused.
func TestMigrateToEtcd(t *testing.T) {
	meta := filepath.Join(t.TempDir(), "meta")
	src, err := Open(meta, Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := src.ShareRoot()
	d := must[*shedfs.Inode](t)(src.Create(root, "d", dir(), nil))
	f := must[*shedfs.Inode](t)(src.Create(d.Ino, "f", file(0o644), nil))
	if err := src.SetXattr(f.Ino, "user.x", []byte("v"), 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testEtcd(t)
	st, err := MigrateToEtcd(meta, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records < 8 {
		t.Fatalf("migrated %d records", st.Records)
	}
	if _, err := MigrateToEtcd(meta, cfg, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("second migration to the same prefix: %v", err)
	}
	dst, err := OpenEtcd(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if !dst.WasClean() || dst.ShareRoot() != root {
		t.Fatalf("migrated store: clean %v, share root %d want %d", dst.WasClean(), dst.ShareRoot(), root)
	}
	n := must[*shedfs.Inode](t)(dst.Lookup(d.Ino, "f"))
	if n.Ino != f.Ino {
		t.Fatalf("d/f is inode %d on etcd, %d before", n.Ino, f.Ino)
	}
	if v, err := dst.GetXattr(f.Ino, "user.x"); err != nil || string(v) != "v" {
		t.Fatalf("xattr after migration: %q %v", v, err)
	}
	rep, err := dst.Check(dirBlobs{t.TempDir()}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind != KindMissingBlob {
			t.Errorf("check after migration: %+v", p)
		}
	}
}
