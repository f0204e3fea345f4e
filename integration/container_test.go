package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// containerUID is the unprivileged uid:gid the container runs as, and the
// owner the view presents.
const containerUID = "1000"

// requireBwrap fails the test under CI=true, and skips it otherwise, unless
// bubblewrap and setpriv are installed and bwrap can start a sandbox here.
func requireBwrap(t *testing.T) {
	t.Helper()
	reason := ""
	for _, tool := range []string{"bwrap", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			reason = tool + " is not installed (Debian packages bubblewrap, util-linux)"
		}
	}
	if reason == "" {
		out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--", "true").CombinedOutput()
		if err != nil {
			reason = "bwrap cannot start a sandbox here: " + err.Error() + ": " + strings.TrimSpace(string(out))
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", reason)
	}
	t.Skip(reason)
}

// TestContainerBwrap bind-mounts a served view into a bubblewrap sandbox,
// as a container runtime does (-v /run/shedfs/alice:/workspace), and works
// there as the unprivileged uid 1000 that the view presents as owner: git
// init, add, commit and log; tar create and extract; reading an imported
// file; and writes into uploads/, refused with "Permission denied".
func TestContainerBwrap(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	requireBwrap(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--uid", containerUID, "--gid", containerUID, "--store", store)
	src := filepath.Join(t.TempDir(), "brief.txt")
	mustWrite(t, src, []byte("imported\n"), 0o600)
	adminOK(t, "import", "--user", "alice", "--store", store, src)
	s := startServe(t, store, "alice")

	script := `set -eu
id -u; id -g
cd /workspace
git init -q repo
cd repo
printf 'one\n' > a.txt
mkdir -p d && printf 'two\n' > d/b.txt
git add a.txt d
git -c user.name=agent -c user.email=agent@example.com commit -q -m "first commit"
printf 'three\n' >> a.txt
git -c user.name=agent -c user.email=agent@example.com commit -q -am "second commit"
git log --format=%s
git fsck --no-progress
git status --porcelain
cd /workspace
tar -cf repo.tar repo
mkdir output/x
tar -xf repo.tar -C output/x
cmp repo/a.txt output/x/repo/a.txt
cat output/x/repo/d/b.txt
cat uploads/brief.txt
if printf 'no\n' > uploads/new.txt; then echo "uploads/new.txt written"; exit 1; fi
if printf 'no\n' >> uploads/brief.txt; then echo "uploads/brief.txt written"; exit 1; fi
echo done
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// bwrap runs as root, as a container runtime does, sets up the mount
	// namespace with the view bound at /workspace and the host's /usr and
	// /etc read-only, and setpriv drops to the container's uid.
	cmd := exec.CommandContext(ctx, "bwrap",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--ro-bind", "/etc", "/etc",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", s.In("alice"), "/workspace",
		"--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LC_ALL", "C",
		"setpriv", "--reuid", containerUID, "--regid", containerUID, "--clear-groups", "--",
		"sh", "-c", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	got := string(out)
	if err != nil {
		t.Fatalf("script in the sandbox: %v\n%s", err, got)
	}
	for _, want := range []string{
		containerUID + "\n" + containerUID + "\n",
		"second commit\nfirst commit\n",
		"two\n", "imported\n",
		"uploads/new.txt: Permission denied",
		"uploads/brief.txt: Permission denied",
		"done\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sandbox output lacks %q:\n%s", want, got)
		}
	}

	// From the host: the commit landed in the view, and the refusals are
	// in the audit trail.
	if head := mustRead(t, s.In("alice", "repo", ".git", "HEAD")); !strings.Contains(string(head), "refs/heads/") {
		t.Errorf("repo/.git/HEAD in the view: %q", head)
	}
	checkAudit(t, store, []auditWant{
		{"alice", "uploads:alice", "create", "/uploads/new.txt", "EACCES", "uploads_readonly"},
		{"alice", "uploads:alice", "write", "/uploads/brief.txt", "EACCES", "uploads_readonly"},
	})
	s.Stop()
	fsckClean(t, store)
}
