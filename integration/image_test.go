package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// podmanArgs are what every `podman run` of the image test adds for this
// machine, harmless elsewhere:
//   - the runtime runc when it is installed: crun refuses a host whose
//     cgroups are hybrid with a controller on the v2 hierarchy ("cgroups
//     in hybrid mode not supported"), as some sandboxes are;
//   - no network: nothing here needs one, and a bridge needs iptables,
//     which podman only suggests;
//   - ulimits no higher than this process's: podman's defaults (nofile
//     1048576, nproc the host's, after podman lowered its own to 32768)
//     need CAP_SYS_RESOURCE to set, which a sandboxed root may lack
//     ("setrlimit RLIMIT_NOFILE: Operation not permitted").
func podmanArgs(t *testing.T) []string {
	t.Helper()
	args := []string{"--network", "none"}
	if _, err := exec.LookPath("runc"); err == nil {
		args = append(args, "--runtime", "runc")
	}
	var nofile, nproc unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &nproc); err != nil {
		t.Fatal(err)
	}
	nf, np := min(nofile.Max, 1<<20), min(nproc.Max, 32768)
	return append(args, "--ulimit", fmt.Sprintf("nofile=%d:%d", nf, nf), "--ulimit", fmt.Sprintf("nproc=%d:%d", np, np))
}

// staticHelper builds a tiny static program for the second container (the
// image has no shell and no cat): with one argument it prints that file,
// with two it writes the second to the first.
func staticHelper(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"io"
	"os"
)

func main() {
	if len(os.Args) == 3 {
		if err := os.WriteFile(os.Args[1], []byte(os.Args[2]), 0o644); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		return
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	io.Copy(os.Stdout, f)
}
`
	mustWrite(t, filepath.Join(dir, "main.go"), []byte(src), 0o644)
	cmd := exec.Command("go", "build", "-o", "rw", "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, out)
	}
	return filepath.Join(dir, "rw")
}

// imageFiles lists the regular files (and anything but directories) of an
// image, through podman image mount.
func imageFiles(t *testing.T, podman, image string) []string {
	t.Helper()
	out, err := exec.Command(podman, "image", "mount", image).Output()
	if err != nil {
		t.Fatalf("podman image mount: %v", err)
	}
	defer exec.Command(podman, "image", "unmount", image).Run()
	root := strings.TrimSpace(string(out))
	var files []string
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// TestContainerImage: `make image` builds the image with podman; the
// image runs serve (--device /dev/fuse --cap-add SYS_ADMIN) on a store in
// a host directory, its views reach the host through an rshared mount
// root, a second `podman run` that bind-mounts a view reads a file written
// from the host and writes one the host reads, and `podman stop` unmounts
// every view.
func TestContainerImage(t *testing.T) {
	requireFUSE(t)
	podman := needTool(t, "podman", "podman")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("localhost/shedfs-it:%d", os.Getpid())
	start := time.Now()
	// Its own tag only, removed at the end: no image is left behind.
	mk := exec.Command("make", "image", "IMAGE_TAGS=-t "+tag)
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image took %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", tag).Run() })
	// The image holds the binary and its license, nothing else.
	out, err := exec.Command(podman, "image", "inspect", "--format", "{{.Config.Entrypoint}}", tag).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "[/usr/local/bin/shedfs]" {
		t.Errorf("image inspect: %v %q, want the entrypoint /usr/local/bin/shedfs", err, out)
	}
	if files := imageFiles(t, podman, tag); !slices.Equal(files, []string{"usr/local/bin/shedfs", "usr/share/doc/shedfs/LICENSE"}) {
		t.Errorf("the image holds %q, want the binary and its license only", files)
	}

	// The store on the host; the mount root a shared mount, so that what
	// the container mounts below it shows on the host.
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	hostRoot := newMountpoint(t)
	if err := unix.Mount(hostRoot, hostRoot, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount the mount root: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(hostRoot, unix.MNT_DETACH) })
	if err := unix.Mount("", hostRoot, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		t.Fatalf("make the mount root shared: %v", err)
	}
	run := podmanArgs(t)
	name := fmt.Sprintf("shedfs-it-%d", os.Getpid())
	args := append([]string{"run", "-d", "--rm", "--name", name}, run...)
	args = append(args, "--device", "/dev/fuse", "--cap-add", "SYS_ADMIN",
		"-v", store+":/var/lib/shedfs", "-v", hostRoot+":/run/shedfs:rshared",
		tag, "serve", "--store", "/var/lib/shedfs", "--mount-root", "/run/shedfs")
	if out, err := exec.Command(podman, args...).CombinedOutput(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	logs := func() string {
		out, _ := exec.Command(podman, "logs", name).CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() {
		exec.Command(podman, "rm", "-f", "-t", "0", name).Run()
		for _, m := range mounts() {
			if strings.HasPrefix(m.point, hostRoot+"/") {
				abortAndDetach(m)
			}
		}
	})
	view := filepath.Join(hostRoot, "alice")
	deadline := time.Now().Add(3 * mountTimeout)
	for {
		if m, ok := findMount(view); ok && m.fstype == "fuse.shedfs" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's view did not reach the host at %s\nlogs:\n%s", view, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustWrite(t, filepath.Join(view, "hello"), []byte("from the host\n"), 0o644)

	// A second container with the view bind-mounted, as a workload gets it.
	helper := staticHelper(t)
	second := func(args ...string) string {
		t.Helper()
		a := append([]string{"run", "--rm"}, run...)
		a = append(a, "-v", helper+":/rw:ro", "-v", view+":/workspace:rshared", "--entrypoint", "/rw", tag)
		out, err := exec.Command(podman, append(a, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("second podman run %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if got := second("/workspace/hello"); got != "from the host\n" {
		t.Errorf("the second container read %q through the view", got)
	}
	second("/workspace/output/reply", "from the container\n")
	if got := string(mustRead(t, filepath.Join(view, "output", "reply"))); got != "from the container\n" {
		t.Errorf("the host read %q of what the second container wrote", got)
	}

	// The admin socket in the store reaches the daemon in the container:
	// a user added from the host gets a view on the host at once.
	adminOK(t, "user", "add", "bob", "--store", store)
	if m, ok := findMount(filepath.Join(hostRoot, "bob")); !ok || m.fstype != "fuse.shedfs" {
		t.Errorf("no view of bob on the host after user add through the container's admin socket\nlogs:\n%s", logs())
	}

	// podman stop: SIGTERM, the drain, every view unmounted.
	if out, err := exec.Command(podman, "stop", "-t", "30", name).CombinedOutput(); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, out)
	}
	if _, ok := findMount(view); ok {
		t.Errorf("alice's view still mounted on the host after podman stop")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(store, "meta"), &st); err != nil {
		t.Errorf("the store on the host: %v", err)
	}
	fsckClean(t, store)
}
