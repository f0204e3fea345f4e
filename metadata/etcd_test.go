package metadata

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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
