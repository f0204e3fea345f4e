package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run serve as an operator deploys it (issue 29): structured
// logs, health endpoints, a config file, systemd's notify protocol, the
// drain at stop.

// TestServeLogFormatJSON: with --log-format json (given after the
// command, as a unit file writes it) every line serve writes on stderr,
// from start to a clean stop, is one JSON object with a time, a level and
// a message.
func TestServeLogFormatJSON(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServeWith(t, store, []string{"--log-format", "json"}, "alice")
	adminOK(t, "user", "add", "bob", "--store", store)
	s.waitView("bob")
	s.Stop()
	lines := strings.Split(strings.TrimSuffix(s.Stderr(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("serve logged %d lines, want at least 3 (views mounted, serving, stopped):\n%s", len(lines), s.Stderr())
	}
	var msgs []string
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Errorf("not one JSON object: %q: %v", l, err)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("line %q has no %q", l, k)
			}
		}
		msgs = append(msgs, ev["msg"].(string))
	}
	for _, want := range []string{"view mounted", "serving", "stopped cleanly"} {
		found := false
		for _, m := range msgs {
			found = found || m == want
		}
		if !found {
			t.Errorf("no %q event in %q", want, msgs)
		}
	}
}

// notifyListener is a fake service manager: it receives what serve sends
// through NOTIFY_SOCKET and, at each message, whether every view in
// views was mounted when it arrived.
type notifyListener struct {
	path string
	msgs chan notifyMsg
}

type notifyMsg struct {
	text    string
	mounted []string // the views of want mounted when it arrived
}

func listenNotify(t *testing.T, root string, users []string) *notifyListener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := &notifyListener{path: path, msgs: make(chan notifyMsg, 16)}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := ln.Read(buf)
			if err != nil {
				close(n.msgs)
				return
			}
			m := notifyMsg{text: string(buf[:k])}
			for _, u := range users {
				if _, ok := findMount(filepath.Join(root, u)); ok {
					m.mounted = append(m.mounted, u)
				}
			}
			n.msgs <- m
		}
	}()
	return n
}

// next waits for the next message holding want ("READY=1").
func (n *notifyListener) next(t *testing.T, want string, s *serveDaemon) notifyMsg {
	t.Helper()
	timeout := time.After(mountTimeout)
	for {
		select {
		case m, ok := <-n.msgs:
			if !ok {
				t.Fatalf("notify socket closed before %q", want)
			}
			if slices.Contains(strings.Split(m.text, "\n"), want) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %q on NOTIFY_SOCKET within %v\nstderr:\n%s", want, mountTimeout, s.Stderr())
		}
	}
}

// launchServe starts serve with args (ending before the mount root,
// which it appends) and env on the fresh mount root root, without waiting
// for anything, and detaches whatever it leaves mounted under the root.
func launchServe(t *testing.T, root string, env, args []string) *serveDaemon {
	t.Helper()
	t.Cleanup(func() {
		for _, m := range mounts() {
			if strings.HasPrefix(m.point, root+"/") {
				t.Errorf("%s still mounted after serve stopped", m.point)
				abortAndDetach(m)
			}
		}
	})
	v := launchView(t, root, env, append(args, "--mount-root"))
	return &serveDaemon{View: v, Root: root}
}

// metricsAddr is the address serve logged (in JSON) it serves metrics at.
func metricsAddr(t *testing.T, s *serveDaemon) string {
	t.Helper()
	re := regexp.MustCompile(`"msg":"metrics listening","addr":"([^"]+)"`)
	m := re.FindStringSubmatch(s.Stderr())
	if m == nil {
		t.Fatalf("serve logged no metrics address:\n%s", s.Stderr())
	}
	return m[1]
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeNotifyReady: serve, started as systemd starts a Type=notify
// unit (NOTIFY_SOCKET, its settings in a config file), sends READY=1
// only once every user's view is mounted, when /readyz says ready too,
// and STOPPING=1 at SIGTERM.
func TestServeNotifyReady(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	users := []string{"alice", "bob", "carol"}
	for _, u := range users {
		adminOK(t, "user", "add", u, "--store", store)
	}
	cfg := filepath.Join(t.TempDir(), "shedfs.toml")
	mustWrite(t, cfg, []byte(fmt.Sprintf("store = %q\nmetrics = \"127.0.0.1:0\"\nlog-format = \"json\"\n", store)), 0o644)
	root := newMountpoint(t)
	n := listenNotify(t, root, users)
	s := launchServe(t, root, []string{"NOTIFY_SOCKET=" + n.path}, []string{"serve", "--config", cfg})
	ready := n.next(t, "READY=1", s)
	if !slices.Equal(ready.mounted, users) {
		t.Errorf("READY=1 came when only %v of %v were mounted", ready.mounted, users)
	}
	if !strings.Contains(ready.text, "STATUS=serving 3 views") {
		t.Errorf("READY=1 message %q has no STATUS", ready.text)
	}
	if code, body := httpGet(t, "http://"+metricsAddr(t, s)+"/readyz"); code != 200 {
		t.Errorf("after READY=1, /readyz = %d %q", code, body)
	}
	s.Stop()
	if m := n.next(t, "STOPPING=1", s); !strings.Contains(m.text, "STATUS=stopping") {
		t.Errorf("STOPPING=1 message %q has no STATUS", m.text)
	}
}

// needTool returns the path of a tool .ci/run installs (from the
// Debian package pkg), skipping without it, or failing under CI=true.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not installed (Debian package %s, which .ci/run installs): %v", name, pkg, err)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
	return ""
}

// TestSystemdUnitVerifies: deploy/systemd/shedfs.service passes
// systemd-analyze verify without a word (an unknown or misspelt option is
// only a warning there, so any output fails), with ExecStart pointing at
// the binary under test; the config file it names is the example's, which
// serve reads; the tmpfiles.d entry makes the mount root mode 0700.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze := needTool(t, "systemd-analyze", "systemd")
	tmpfiles := needTool(t, "systemd-tmpfiles", "systemd")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	unit := string(mustRead(t, filepath.Join(root, "deploy/systemd/shedfs.service")))
	const exec0 = "ExecStart=/usr/local/bin/shedfs serve --config /etc/shedfs/shedfs.toml\n"
	if !strings.Contains(unit, exec0) {
		t.Fatalf("the unit has no %q", exec0)
	}
	for _, want := range []string{"Type=notify\n", "Restart=on-failure\n", "DeviceAllow=/dev/fuse rw\n", "StandardError=journal\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit has no %q", want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "shedfs.service")
	mustWrite(t, path, []byte(strings.Replace(unit, "ExecStart=/usr/local/bin/shedfs", "ExecStart="+shedfsBin, 1)), 0o644)
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify shedfs.service: %v\n%s", err, out)
	}

	// The example config is what ExecStart reads: serve accepts it.
	cfg := filepath.Join(root, "deploy/systemd/shedfs.toml")
	stdout, stderr, code := runCLI(t, "serve", "--config", cfg, "--print-config")
	if code != 0 || !strings.Contains(stdout, "\nmount-root = \"/run/shedfs\"\n") {
		t.Errorf("serve --config %s --print-config: exit %d\n%s%s", cfg, code, stdout, stderr)
	}

	// tmpfiles.d, applied under a scratch root.
	troot := t.TempDir()
	if out, err := exec.Command(tmpfiles, "--create", "--root="+troot, filepath.Join(root, "deploy/systemd/shedfs.conf")).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-tmpfiles --create shedfs.conf: %v\n%s", err, out)
	}
	for _, d := range []string{"run/shedfs", "var/lib/shedfs", "etc/shedfs"} {
		fi, err := os.Stat(filepath.Join(troot, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("/%s after tmpfiles: %v %v, want a directory of mode 0700", d, err, fi)
		}
	}
}

// TestServeStopDrain: SIGTERM to serve while views are in use: it says
// which views it waits for and which processes hold them (a working
// directory, an open file, a sandbox's bind mount in its own mount
// namespace), unmounts each view once let go, and at --stop-timeout
// detaches the rest lazily and exits 0.
func TestServeStopDrain(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	store := newStore(t)
	for _, u := range []string{"alice", "bob", "carol"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	const timeout = 6 * time.Second
	s := startServeWith(t, store, []string{"--stop-timeout", timeout.String()}, "alice", "bob", "carol")
	mustWrite(t, s.In("bob", "held"), []byte("x"), 0o644)

	// alice's view: a process whose working directory is in it.
	cwd := exec.Command("sleep", "120")
	cwd.Dir = s.In("alice")
	// bob's view: a process with a file open in it.
	f, err := os.Open(s.In("bob", "held"))
	if err != nil {
		t.Fatal(err)
	}
	open := exec.Command("sleep", "120")
	open.Stdin = f
	// carol's view: a sandbox that bind-mounted it, as a container does.
	sandbox := exec.Command("bwrap", "--unshare-pid", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
		"--bind", s.In("carol"), "/workspace", "--", "sleep", "120")
	for _, c := range []*exec.Cmd{cwd, open, sandbox} {
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	f.Close()
	// The sandbox has mounted carol's view once its mount namespace
	// shows it.
	time.Sleep(300 * time.Millisecond)

	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog := func(what string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(s.Stderr(), w)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: serve did not log %q\nstderr:\n%s", what, want, s.Stderr())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLog("what the stop waits for",
		"view still in use, waiting\" user=alice",
		fmt.Sprintf("pid %d (sleep): working directory", cwd.Process.Pid),
		"view still in use, waiting\" user=bob",
		fmt.Sprintf("pid %d (sleep): open %s", open.Process.Pid, s.In("bob", "held")),
		"view still in use, waiting\" user=carol",
		"its mount namespace mounts the view at /workspace")
	// alice lets go: her view unmounts before the deadline.
	cwd.Process.Kill()
	cwd.Wait()
	waitLog("alice's view once let go", "msg=\"view unmounted\" user=alice")
	if time.Since(start) >= timeout {
		t.Errorf("alice's view unmounted only after the stop timeout")
	}
	// bob and carol hold on: detached at the deadline, and serve exits 0.
	if !s.waitExit(timeout + 10*time.Second) {
		t.Fatalf("serve did not exit within %v of SIGTERM\nstderr:\n%s", timeout+10*time.Second, s.Stderr())
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("serve exited after %v, before its stop timeout %v, with views in use", took, timeout)
	}
	for _, u := range []string{"bob", "carol"} {
		if !strings.Contains(s.Stderr(), "stop timeout: detaching a view still in use; its holders get ENOTCONN\" user="+u) {
			t.Errorf("no detach of %s's view logged\nstderr:\n%s", u, s.Stderr())
		}
	}
	s.Stop() // exit status 0, nothing left mounted
}

// TestUserSetOwnerLive: `shedfs user set alice --uid 1000 --gid 1000` on
// a user made without an owner: her mounted view shows the new owner at
// once, in entries the kernel had cached, without a remount (a process
// working in the view keeps its directory), so that a sandbox running as
// uid 1000 can write in it; --uid 0 --gid 0 goes back.
func TestUserSetOwnerLive(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	mustMkdir(t, s.In("alice", "work"), 0o755)
	mustWrite(t, s.In("alice", "work", "f"), []byte("x"), 0o644)
	owner := func(p string) (uint32, uint32) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid, st.Gid
	}
	paths := []string{s.In("alice"), s.In("alice", "work"), s.In("alice", "work", "f"), s.In("alice", "share"), s.In("alice", "groups")}
	for _, p := range paths {
		if u, g := owner(p); u != 0 || g != 0 {
			t.Fatalf("%s owned by %d:%d before, want 0:0", p, u, g)
		}
	}
	// A process working in the view: a remount would pull the view from
	// under it (or be refused).
	cwd := exec.Command("sleep", "60")
	cwd.Dir = s.In("alice", "work")
	if err := cwd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cwd.Process.Kill(); cwd.Wait() })

	sandboxWrite := func(name string) error {
		cmd := exec.Command("bwrap", "--unshare-pid", "--die-with-parent",
			"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
			"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
			"--bind", s.In("alice"), "/workspace",
			"setpriv", "--reuid", containerUID, "--regid", containerUID, "--clear-groups", "--",
			"sh", "-c", "echo hi > /workspace/work/"+name)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := sandboxWrite("before"); err == nil {
		t.Fatalf("uid %s wrote in a view owned by root", containerUID)
	}

	out := adminOK(t, "user", "set", "alice", "--uid", containerUID, "--gid", containerUID, "--store", store)
	if !strings.Contains(out, "presented owner uid 1000, gid 1000") || !strings.Contains(out, "shows it now") {
		t.Errorf("user set said %q", out)
	}
	// At once: the attributes the kernel cached were invalidated.
	for _, p := range paths {
		if u, g := owner(p); u != 1000 || g != 1000 {
			t.Errorf("%s owned by %d:%d right after user set, want 1000:1000", p, u, g)
		}
	}
	if err := sandboxWrite("after"); err != nil {
		t.Errorf("uid %s cannot write in the view after user set: %v", containerUID, err)
	}
	if cwd.ProcessState != nil {
		t.Errorf("the process working in the view ended")
	}
	if m, ok := findMount(s.In("alice")); !ok || m.minor != mountMinor(t, s.In("alice")) {
		t.Errorf("the view was remounted")
	}
	if strings.Contains(s.Stderr(), "remount") {
		t.Errorf("serve remounted the view:\n%s", s.Stderr())
	}
	if out := adminOK(t, "user", "show", "alice", "--store", store); !strings.Contains(out, "uid 1000, gid 1000") {
		t.Errorf("user show after user set:\n%s", out)
	}

	// Back to the stored owners.
	adminOK(t, "user", "set", "alice", "--uid", "0", "--gid", "0", "--store", store)
	within2s(t, "owner back to 0:0", func() bool { u, g := owner(s.In("alice", "work", "f")); return u == 0 && g == 0 })
	cwd.Process.Kill()
	cwd.Wait()
	s.Stop()
}

// mountMinor is the minor device number of the mount at dir.
func mountMinor(t *testing.T, dir string) int {
	t.Helper()
	m, ok := findMount(dir)
	if !ok {
		t.Fatalf("%s not mounted", dir)
	}
	return m.minor
}
