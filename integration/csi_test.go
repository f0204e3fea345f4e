package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// kubelet is what kubelet holds of a CSI driver: a gRPC connection to its
// socket and the node service.
type kubelet struct {
	t    *testing.T
	conn *grpc.ClientConn
	node csipb.NodeClient
}

func dialCSI(t *testing.T, ep string) *kubelet {
	t.Helper()
	conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &kubelet{t: t, conn: conn, node: csipb.NewNodeClient(conn)}
}

// mountCap is the capability kubelet gives a filesystem volume.
func mountCap(mode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

func (k *kubelet) publish(vol, target string, attrs map[string]string) error {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := k.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: vol, TargetPath: target, VolumeContext: attrs,
		VolumeCapability: mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
	})
	return err
}

func (k *kubelet) mustPublish(vol, target string, attrs map[string]string) {
	k.t.Helper()
	if err := k.publish(vol, target, attrs); err != nil {
		k.t.Fatalf("NodePublishVolume %s at %s: %v", vol, target, err)
	}
}

func (k *kubelet) mustUnpublish(vol, target string) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := k.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target}); err != nil {
		k.t.Fatalf("NodeUnpublishVolume %s at %s: %v", vol, target, err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		k.t.Errorf("target %s after unpublish: %v, want it removed", target, err)
	}
}

// podTarget is where kubelet asks for a pod's CSI volume: a directory
// whose parent kubelet made.
func podTarget(t *testing.T, pod string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pods", pod, "volumes", "kubernetes.io~csi", "workspace")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "mount")
	// Whatever the test does, nothing stays mounted there: registered
	// after the daemon started, so it runs before the daemon stops.
	t.Cleanup(func() {
		for range 4 {
			if _, ok := findMount(target); !ok {
				return
			}
			lazyUnmount(target)
		}
	})
	return target
}

type sessionRow struct {
	ID, User, Mountpoint string
	Quota                struct{ Bytes int64 }
}

func sessionList(t *testing.T, store string) []sessionRow {
	t.Helper()
	var out []sessionRow
	if err := json.Unmarshal([]byte(adminOK(t, "session", "list", "--store", store, "--json")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// inSandbox runs script as uid 1000 in a bubblewrap sandbox with dir bound
// at /workspace, as a container runtime runs a pod's container.
func inSandbox(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bwrap",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--ro-bind", "/etc", "/etc",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", dir, "/workspace",
		"--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LC_ALL", "C",
		"setpriv", "--reuid", containerUID, "--regid", containerUID, "--clear-groups", "--",
		"sh", "-c", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCSIKubelet drives shedfs serve --csi over gRPC as kubelet does for
// an ephemeral inline volume with newSession: the publish opens a session
// with its quota and bind-mounts its view at the target; a container
// (bubblewrap, uid 1000) runs git there and a dd past the session quota
// that fails with EDQUOT; the volume stats show the session's quota; the
// unpublish closes the session, whose files are then in alice's trash.
// Publish and unpublish are idempotent, a second cycle works the same, a
// read-only publish of alice's main view refuses writes, and a daemon
// restart between publish and unpublish still unpublishes correctly.
func TestCSIKubelet(t *testing.T) {
	requireFUSE(t)
	requireBwrap(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--uid", containerUID, "--gid", containerUID, "--quota", "1GiB", "--store", store)
	s, ep := startCSI(t, store, "alice")
	k := dialCSI(t, ep)
	inline := map[string]string{
		"user": "alice", "newSession": "true", "sessionQuota": "8MiB", "sessionTTL": "1h",
		"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "agent-run-1",
	}

	for cycle := 1; cycle <= 2; cycle++ {
		vol := "csi-0123456789abcdef"
		target := podTarget(t, "pod-uid-1")
		k.mustPublish(vol, target, inline)
		k.mustPublish(vol, target, inline) // kubelet retries: the same session
		sessions := sessionList(t, store)
		if len(sessions) != 1 || sessions[0].User != "alice" || sessions[0].Quota.Bytes != 8<<20 {
			t.Fatalf("cycle %d: sessions after two publishes: %+v", cycle, sessions)
		}
		id := sessions[0].ID
		if _, ok := findMount(target); !ok {
			t.Fatalf("cycle %d: nothing mounted at %s", cycle, target)
		}

		out, err := inSandbox(t, target, `set -eu
id -u
git init -q repo
cd repo
printf 'hello\n' > a.txt
git add a.txt
git -c user.name=agent -c user.email=agent@example.com commit -q -m "first commit"
git log --format=%s
cd /workspace
if dd if=/dev/zero of=big bs=1M count=16 2>dd.err; then echo "dd past the quota passed"; exit 1; fi
cat dd.err
rm -f big dd.err
echo done
`)
		if err != nil {
			t.Fatalf("cycle %d: sandbox: %v\n%s", cycle, err, out)
		}
		for _, want := range []string{containerUID + "\n", "first commit\n", "Disk quota exceeded", "done\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("cycle %d: sandbox output lacks %q:\n%s", cycle, want, out)
			}
		}

		// The volume's stats are the session's quota.
		st, err := k.node.NodeGetVolumeStats(context.Background(), &csipb.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: target})
		if err != nil {
			t.Fatalf("cycle %d: NodeGetVolumeStats: %v", cycle, err)
		}
		var bytes, inodes *csipb.VolumeUsage
		for _, u := range st.GetUsage() {
			switch u.GetUnit() {
			case csipb.VolumeUsage_BYTES:
				bytes = u
			case csipb.VolumeUsage_INODES:
				inodes = u
			}
		}
		if bytes == nil || inodes == nil || bytes.GetTotal() != 8<<20 || bytes.GetUsed() <= 0 || bytes.GetAvailable() >= 8<<20 || inodes.GetUsed() <= 0 {
			t.Errorf("cycle %d: volume stats %v, want the session's 8 MiB with some used", cycle, st.GetUsage())
		}

		k.mustUnpublish(vol, target)
		k.mustUnpublish(vol, target) // again: nothing left to do
		if got := sessionList(t, store); len(got) != 0 {
			t.Errorf("cycle %d: sessions after unpublish: %+v", cycle, got)
		}
		trash := adminOK(t, "trash", "list", "--store", store, "--user", "alice")
		if !strings.Contains(trash, "sessions/"+id+"/repo/a.txt") {
			t.Errorf("cycle %d: the session's files are not in alice's trash:\n%s", cycle, trash)
		}
		// The trash is where restore looks: purge so that the next
		// cycle's session, of the same id, is told apart.
		adminOK(t, "trash", "purge", "--store", store, "--holder", "user:alice", "--all")
	}

	// A static PV of alice's main view, read-only: writes are refused.
	ro := podTarget(t, "pod-uid-2")
	k.mustPublish("alice-home", ro, map[string]string{"user": "alice", "readOnly": "true"})
	if err := os.WriteFile(filepath.Join(ro, "x"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write in a read-only publication: %v, want EROFS", err)
	}
	k.mustUnpublish("alice-home", ro)

	// A static PV naming an open session: its view, left open at
	// unpublish.
	adminOK(t, "session", "open", "--store", store, "--user", "alice", "--id", "s1")
	st := podTarget(t, "pod-uid-5")
	k.mustPublish("alice@s1", st, map[string]string{"user": "alice", "session": "s1"})
	mustWrite(t, filepath.Join(st, "from-pod.txt"), []byte("pod\n"), 0o644)
	within2s(t, "from-pod.txt in alice@s1's view", func() bool {
		_, err := os.Stat(s.In("alice@s1", "from-pod.txt"))
		return err == nil
	})
	k.mustUnpublish("alice@s1", st)
	if got := sessionList(t, store); len(got) != 1 || got[0].ID != "s1" {
		t.Errorf("sessions after unpublishing a session it did not open: %+v", got)
	}
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "s1")

	// A claim's volume (CreateVolume) whose session was closed since:
	// FailedPrecondition at publish; DeleteVolume still succeeds.
	ctrl := csipb.NewControllerClient(k.conn)
	cv, err := ctrl.CreateVolume(context.Background(), &csipb.CreateVolumeRequest{
		Name:               "pvc-closed",
		CapacityRange:      &csipb.CapacityRange{RequiredBytes: 16 << 20},
		VolumeCapabilities: []*csipb.VolumeCapability{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		Parameters:         map[string]string{"user": "alice"},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	if got := cv.GetVolume().GetVolumeId(); got != "alice@pvc-closed" {
		t.Errorf("volume id %q, want alice@pvc-closed", got)
	}
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "pvc-closed")
	err = k.publish(cv.GetVolume().GetVolumeId(), podTarget(t, "pod-uid-6"), cv.GetVolume().GetVolumeContext())
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("publish of a volume whose session was closed: %v, want FailedPrecondition", err)
	}
	if _, err := ctrl.DeleteVolume(context.Background(), &csipb.DeleteVolumeRequest{VolumeId: cv.GetVolume().GetVolumeId()}); err != nil {
		t.Errorf("DeleteVolume of a volume whose session was closed: %v", err)
	}
	adminOK(t, "trash", "purge", "--store", store, "--holder", "user:alice", "--all")

	// A claim with onDelete: keep: listed while it lives, and its files
	// stay in alice's home/sessions/ when it is deleted. The capacity of
	// the class's user is what her view has left of her 1 GiB.
	kv, err := ctrl.CreateVolume(context.Background(), &csipb.CreateVolumeRequest{
		Name:               "pvc-keep",
		CapacityRange:      &csipb.CapacityRange{RequiredBytes: 16 << 20},
		VolumeCapabilities: []*csipb.VolumeCapability{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		Parameters:         map[string]string{"user": "alice", "onDelete": "keep"},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	mustWrite(t, s.In("alice@pvc-keep", "result.txt"), []byte("42\n"), 0o644)
	lv, err := ctrl.ListVolumes(context.Background(), &csipb.ListVolumesRequest{})
	if err != nil || len(lv.GetEntries()) != 1 || lv.GetEntries()[0].GetVolume().GetVolumeId() != "alice@pvc-keep" || lv.GetEntries()[0].GetVolume().GetCapacityBytes() != 16<<20 {
		t.Errorf("ListVolumes: %v, %v", lv, err)
	}
	gc, err := ctrl.GetCapacity(context.Background(), &csipb.GetCapacityRequest{Parameters: map[string]string{"user": "alice"}})
	if err != nil || gc.GetAvailableCapacity() <= 0 || gc.GetAvailableCapacity() > 1<<30 {
		t.Errorf("GetCapacity of alice (1 GiB quota): %v, %v", gc, err)
	}
	if _, err := ctrl.DeleteVolume(context.Background(), &csipb.DeleteVolumeRequest{VolumeId: kv.GetVolume().GetVolumeId()}); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if got := string(mustRead(t, s.In("alice", "sessions", "pvc-keep", "result.txt"))); got != "42\n" {
		t.Errorf("kept result.txt: %q", got)
	}

	// Snapshots are not offered: not advertised, and Unimplemented.
	caps, err := ctrl.ControllerGetCapabilities(context.Background(), &csipb.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps.GetCapabilities() {
		if tp := c.GetRpc().GetType(); tp == csipb.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT || tp == csipb.ControllerServiceCapability_RPC_CLONE_VOLUME {
			t.Errorf("controller advertises %s", tp)
		}
	}
	_, err = ctrl.CreateSnapshot(context.Background(), &csipb.CreateSnapshotRequest{Name: "snap", SourceVolumeId: "alice@x"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("CreateSnapshot: %v, want Unimplemented", err)
	}

	// Clear refusals.
	for _, tc := range []struct {
		attrs map[string]string
		code  codes.Code
	}{
		{map[string]string{"user": "nobody"}, codes.NotFound},
		{map[string]string{"user": "alice", "session": "gone"}, codes.NotFound},
		{map[string]string{"user": "alice", "newSession": "maybe"}, codes.InvalidArgument},
		{map[string]string{"user": "alice", "sesion": "s1"}, codes.InvalidArgument},
	} {
		err := k.publish("v-bad", podTarget(t, "pod-bad"), tc.attrs)
		if status.Code(err) != tc.code {
			t.Errorf("publish with %v: %v, want %s", tc.attrs, err, tc.code)
		}
	}

	// A restart of the daemon between publish and unpublish: the new
	// daemon finds what the old one published in the store's state and
	// closes the session at unpublish.
	vol, target := "csi-restart", podTarget(t, "pod-uid-3")
	k.mustPublish(vol, target, inline)
	mustWrite(t, filepath.Join(target, "before-restart.txt"), []byte("kept in the trash\n"), 0o644)
	id := sessionList(t, store)[0].ID
	// A crash, or a stop (which waits while pods hold the views, then
	// exits): either way the next daemon has only the store to go by.
	s.Kill()
	s2, ep2 := restartCSI(t, s, ep)
	k2 := dialCSI(t, ep2)
	if got := sessionList(t, store); len(got) != 1 || got[0].ID != id {
		t.Fatalf("sessions after the restart: %+v", got)
	}
	// The pod's mount died with the old daemon: its stats say so.
	_, err = k2.node.NodeGetVolumeStats(context.Background(), &csipb.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: target})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("stats of a volume whose daemon died: %v, want FailedPrecondition", err)
	}
	k2.mustUnpublish(vol, target)
	if got := sessionList(t, store); len(got) != 0 {
		t.Errorf("sessions after unpublish past a restart: %+v", got)
	}
	trash := adminOK(t, "trash", "list", "--store", store, "--user", "alice")
	if !strings.Contains(trash, "sessions/"+id+"/before-restart.txt") {
		t.Errorf("the session's files are not in alice's trash after a restart:\n%s", trash)
	}

	// A mount of the volume that outlives the pod (a copy in a mount
	// namespace kubelet does not know of): the unpublish still closes
	// the session, forced after a grace, and that mount goes dead.
	vol, target = "csi-lingering", podTarget(t, "pod-uid-4")
	k2.mustPublish(vol, target, inline)
	linger := filepath.Join(t.TempDir(), "linger")
	mustMkdir(t, linger, 0o755)
	if err := syscall.Mount(target, linger, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lazyUnmount(linger) })
	start := time.Now()
	k2.mustUnpublish(vol, target)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("unpublish with a lingering mount took %v", took)
	}
	if got := sessionList(t, store); len(got) != 0 {
		t.Errorf("sessions after unpublish with a lingering mount: %+v", got)
	}
	_, err = os.Stat(filepath.Join(linger, "x"))
	if !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("the lingering mount after unpublish: %v, want ENOTCONN", err)
	}
	lazyUnmount(linger)

	s2.Stop()
	fsckClean(t, store)
}

// restartCSI starts shedfs serve --csi again on the store, mount root and
// CSI endpoint of s, which was stopped.
func restartCSI(t *testing.T, s *serveDaemon, ep string) (*serveDaemon, string) {
	t.Helper()
	sock := strings.TrimPrefix(ep, "unix://")
	// The killed daemon's socket: gone, so that its reappearance says
	// the new daemon listens.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	v := launchView(t, s.Root, nil, []string{"serve", "--store", s.Store, "--csi", ep, "--csi-node-id", "node-1", "--mount-root"})
	v.Store = s.Store
	s2 := &serveDaemon{View: v, Root: s.Root}
	s2.waitSocket()
	waitSocketFile(t, s2, sock)
	return s2, ep
}
