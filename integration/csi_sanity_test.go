package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// csiSanityEnv, set to a CSI endpoint, makes TestCSISanitySuite run
// csi-sanity against it; csiSanityDirEnv is the directory for its target
// and staging paths. Ginkgo runs its specs once per process, so
// TestCSISanity runs the suite in a child test process each time.
const (
	csiSanityEnv    = "SHEDFS_CSI_SANITY_ENDPOINT"
	csiSanityDirEnv = "SHEDFS_CSI_SANITY_DIR"
)

// startCSI starts shedfs serve with the CSI driver on a socket of its own
// and returns the daemon and the endpoint.
func startCSI(t *testing.T, store string, users ...string) (*serveDaemon, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	s := startServeWith(t, store, []string{"--csi", "unix://" + sock, "--csi-node-id", "node-1"}, users...)
	waitSocketFile(t, s, sock)
	return s, "unix://" + sock
}

// waitSocketFile waits until the CSI socket answers (its file appears
// at bind(2), before listen(2)).
func waitSocketFile(t *testing.T, s *serveDaemon, sock string) {
	t.Helper()
	deadline := time.Now().Add(mountTimeout)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if s.exited() {
			t.Fatalf("shedfs serve exited before listening on %s\nstderr:\n%s", sock, s.Stderr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CSI socket %s after %v\nstderr:\n%s", sock, mountTimeout, s.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCSISanity runs csi-sanity (github.com/kubernetes-csi/csi-test,
// controller, identity and node specs, "Node Service should work" and
// "should be idempotent" among them) against shedfs serve --csi on a
// real store: CreateVolume opens real sessions, NodePublishVolume
// bind-mounts their real FUSE views into target paths of a temporary
// directory. No mounter is faked.
func TestCSISanity(t *testing.T) {
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--uid", containerUID, "--gid", containerUID, "--quota", "1GiB", "--store", store)
	s, ep := startCSI(t, store, "alice")
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestCSISanitySuite$", "-test.count", "1", "-test.v", "-ginkgo.v", "-ginkgo.no-color")
	cmd.Env = append(os.Environ(), csiSanityEnv+"="+ep, csiSanityDirEnv+"="+dir, "SHEDFS_BIN="+shedfsBin)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS!") {
		t.Fatalf("csi-sanity: %v\n%s", err, out)
	}
	// The specs that drive the node service end to end ran, and passed:
	// csi-sanity skips them for a driver without CreateVolume.
	for _, spec := range []string{
		"Node Service should work",
		"Node Service should be idempotent",
		"Node Service NodeUnpublishVolume should remove target path",
		"Node Service NodeGetVolumeStats should fail when volume does not exist on the specified path",
		"Node Service NodePublishVolume with single node multi writer capability should fail when volume with single node single writer access mode is already mounted at a different target path",
		"Controller Service [Controller Server] CreateVolume should fail when requesting to create a volume with already existing name and different capacity",
		"Controller Service [Controller Server] ListVolumes check the presence of new volumes and absence of deleted ones in the volume list",
	} {
		if !specPassed(string(out), spec) {
			t.Errorf("csi-sanity did not run and pass %q", spec)
		}
	}
	// The summary line: how many specs ran, passed and were skipped.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "Passed") && strings.Contains(line, "Skipped") {
			t.Log(strings.TrimSpace(line))
		}
	}
	// Every volume the suite made was deleted: no session is left open.
	if got := adminOK(t, "session", "list", "--store", store); strings.Contains(got, "alice") {
		t.Errorf("sessions left open after csi-sanity:\n%s", got)
	}
	s.Stop()
	fsckClean(t, store)
}

// specPassed reports whether ginkgo's verbose output shows spec run and
// passed: its name, then a "•" line before the next separator.
func specPassed(out, spec string) bool {
	loc := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(spec) + `\s*$`).FindStringIndex(out)
	if loc == nil {
		return false
	}
	block := out[loc[1]:]
	if j := strings.Index(block, "------"); j >= 0 {
		block = block[:j]
	}
	return strings.Contains(block, "• [")
}

// TestCSISanitySuite is the child of TestCSISanity; it does nothing
// unless run by it.
func TestCSISanitySuite(t *testing.T) {
	ep := os.Getenv(csiSanityEnv)
	if ep == "" {
		t.Skip("run by TestCSISanity")
	}
	dir := os.Getenv(csiSanityDirEnv)
	cfg := sanity.NewTestConfig()
	cfg.Address = ep
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.TestVolumeParameters = map[string]string{"user": "alice"}
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)
}
