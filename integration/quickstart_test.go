package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickStart is what README.md's quick start tells a newcomer to do: the
// command that runs the demo and the lines to try while it runs.
type quickStart struct {
	run []string    // the demo command, as argv ("bin/shedfs", "demo")
	try []quickLine // the lines to try, in order
}

// quickLine is one line to try: the shell command, and what its comment
// leads a reader to expect.
type quickLine struct {
	n       int    // line number in README.md
	cmd     string // the command, comment removed
	refused bool   // the comment says it is refused: it must fail
	prints  string // the comment quotes text the command prints
}

// readQuickStart reads the quick start of README.md: the first sh block
// of "## Quick start" gives the run command (its line with "shedfs
// demo"), the sh block after the quickstart:try marker the lines to try.
func readQuickStart(t *testing.T) quickStart {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var qs quickStart
	section, marker := false, false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case l == "## Quick start":
			section = true
		case section && strings.HasPrefix(l, "## "):
			section = false
		case section && strings.HasPrefix(l, "<!-- quickstart:try"):
			marker = true
		case section && l == "```sh":
			block, end := codeBlock(lines, i+1)
			i = end
			if qs.run == nil {
				for _, b := range block {
					if strings.Contains(b.cmd, "shedfs demo") {
						qs.run = strings.Fields(b.cmd)
					}
				}
			} else if marker && qs.try == nil {
				qs.try = block
			}
		}
	}
	if qs.run == nil {
		t.Fatal("README.md: the quick start names no `shedfs demo` command in its first sh block")
	}
	if len(qs.try) == 0 {
		t.Fatal("README.md: no sh block after the quickstart:try marker of the quick start")
	}
	return qs
}

// codeBlock reads the lines of a fenced block from lines[start] to its
// closing fence, and returns them with the index of the fence.
func codeBlock(lines []string, start int) ([]quickLine, int) {
	var out []quickLine
	i := start
	for ; i < len(lines) && lines[i] != "```"; i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		q := quickLine{n: i + 1, cmd: l}
		if j := strings.Index(l, "  # "); j >= 0 {
			q.cmd = strings.TrimSpace(l[:j])
			comment := strings.TrimSpace(l[j+4:])
			q.refused = strings.HasPrefix(comment, "refused")
			if rest, ok := strings.CutPrefix(comment, "`"); ok {
				if k := strings.Index(rest, "`"); k > 0 {
					q.prints = rest[:k]
				}
			}
		}
		out = append(out, q)
	}
	return out, i
}

// The demo's fixed loopback addresses, as the README names them.
var demoPorts = []string{"127.0.0.1:9567", "127.0.0.1:8467", "127.0.0.1:8468", "127.0.0.1:8469"}

// TestQuickStart follows README.md's quick start literally, as a
// newcomer would: in a fresh directory it starts the demo with the run
// command the README gives, checks every door the demo prints (each view
// lists, the link answers 200, metrics answer, the admin API answers
// status), runs every line the README says to try, in order, checking
// that it succeeds (or, where the README says so, is refused) and prints
// what its comment quotes; then it sends SIGINT to the demo's pid and
// checks that it exits 0 within a few seconds and leaves no mount.
func TestQuickStart(t *testing.T) {
	requireFUSE(t)
	qs := readQuickStart(t)
	for _, tool := range []string{"bash", "getfattr", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quick start needs %s: %v", tool, err)
		}
	}
	for _, addr := range demoPorts {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the demo's address %s is taken (another demo running?): %v", addr, err)
		}
		l.Close()
	}
	dir := t.TempDir()
	mustMkdir(t, filepath.Join(dir, "bin"), 0o755)
	if err := os.Symlink(shedfsBin, filepath.Join(dir, "bin", "shedfs")); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(qs.run[0], qs.run[1:]...)
	cmd.Dir = dir
	cmd.Env = childEnv(nil)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatalf("README's run command %q: %v", strings.Join(qs.run, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			<-done
		}
		for _, m := range mounts() {
			if strings.HasPrefix(m.point, dir+"/") {
				abortAndDetach(m)
			}
		}
	})

	guide := waitGuide(t, out, errOut, done)
	if pid := guide["pid"]; pid != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the demo prints pid %q to stop; the process the README's command started is %d", pid, cmd.Process.Pid)
	}
	checkDoors(t, dir, guide)

	for _, l := range qs.try {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", l.cmd)
		c.Dir, c.Env = dir, childEnv(nil)
		output, err := c.CombinedOutput()
		cancel()
		where := fmt.Sprintf("README.md:%d `%s`", l.n, l.cmd)
		switch {
		case l.refused && err == nil:
			t.Fatalf("%s: succeeded, but the README says it is refused\noutput:\n%s", where, output)
		case !l.refused && err != nil:
			t.Fatalf("%s: %v\noutput:\n%s\ndemo's stderr:\n%s", where, err, output, errOut.String())
		case l.prints != "" && !strings.Contains(string(output), l.prints):
			t.Fatalf("%s: the README says it prints %q; it printed:\n%s", where, l.prints, output)
		}
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Fatalf("the demo exited with %v after SIGINT, not 0\nstderr:\n%s", err, errOut.String())
		}
		t.Logf("the demo stopped %v after SIGINT", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("the demo did not exit within 10s of SIGINT\nstderr:\n%s", errOut.String())
	}
	for _, m := range mounts() {
		if strings.HasPrefix(m.point, dir+"/") {
			t.Errorf("%s still mounted after the demo exited", m.point)
		}
	}
	if !strings.Contains(out.String(), "shedfs demo stopped") {
		t.Errorf("the demo did not say it stopped:\n%s", out.String())
	}
}

// guideLine matches the "  label:  value" lines the demo prints.
var guideLine = regexp.MustCompile(`^  ([a-z]+):\s+(.*)$`)

// waitGuide waits for the demo to print where to look (its last line is
// "stop:") and returns the lines by label, with "pid" from the stop line.
func waitGuide(t *testing.T, out, errOut *syncBuffer, done <-chan error) map[string]string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(out.String(), "  stop:") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the demo exited (%v) before saying where to look\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo printed no guide within 30s\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	}
	guide := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		if m := guideLine.FindStringSubmatch(sc.Text()); m != nil {
			guide[m[1]] = m[2]
		}
	}
	if m := regexp.MustCompile(`kill -INT (\d+)`).FindStringSubmatch(guide["stop"]); m != nil {
		guide["pid"] = m[1]
	}
	for _, k := range []string{"views", "link", "metrics", "admin"} {
		if guide[k] == "" {
			t.Fatalf("the demo's guide has no %q line:\n%s", k, out.String())
		}
	}
	return guide
}

// checkDoors checks that every door the demo printed answers.
func checkDoors(t *testing.T, dir string, guide map[string]string) {
	t.Helper()
	for _, v := range strings.Fields(guide["views"]) {
		p := v
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, v)
		}
		entries, err := os.ReadDir(p)
		if err != nil || len(entries) == 0 {
			t.Errorf("view %s: %d entries, %v", v, len(entries), err)
		}
		if _, ok := findMount(p); !ok {
			t.Errorf("view %s is not a mount", v)
		}
	}
	get := func(c *http.Client, url string) (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	web := &http.Client{Timeout: 30 * time.Second}
	if code, body := get(web, strings.Fields(guide["link"])[0]); code != http.StatusOK || !strings.Contains(body, "Welcome to shedfs") {
		t.Errorf("the demo's link %s: %d %q", guide["link"], code, truncate([]byte(body), 200))
	}
	if code, body := get(web, guide["metrics"]); code != http.StatusOK || !strings.Contains(body, "shedfs_views 3") {
		t.Errorf("metrics %s: %d, no shedfs_views 3 in %q", guide["metrics"], code, truncate([]byte(body), 200))
	}
	// The file API line is a command to run as printed; the MCP line
	// names the server's URL.
	if out, err := exec.Command("bash", "-c", guide["api"]).CombinedOutput(); err != nil || !strings.Contains(string(out), "Welcome to shedfs") {
		t.Errorf("the demo's api line %q: %v %s", guide["api"], err, out)
	}
	if !strings.Contains(guide["mcp"], "http://127.0.0.1:8468/mcp") || guide["token"] == "" {
		t.Errorf("the demo's mcp and token lines: %q %q", guide["mcp"], guide["token"])
	}
	m := regexp.MustCompile(`\(admin API: ([^)]+)\)`).FindStringSubmatch(guide["admin"])
	if m == nil {
		t.Fatalf("the demo's admin line names no socket: %q", guide["admin"])
	}
	sock := m[1]
	if !filepath.IsAbs(sock) {
		sock = filepath.Join(dir, sock)
	}
	admin := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	if code, body := get(admin, "http://x/v1/status"); code != http.StatusOK || !strings.Contains(body, `"daemon":true`) {
		t.Errorf("admin API status on %s: %d %q", sock, code, truncate([]byte(body), 200))
	}
	// The admin line is a command a reader can paste: it must work too.
	fields := strings.Fields(strings.SplitN(guide["admin"], "(", 2)[0])
	c := exec.Command(fields[0], fields[1:]...)
	c.Dir, c.Env = dir, childEnv(nil)
	if output, err := c.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("the demo's admin command %q: %v", fields, err)
		} else {
			t.Errorf("the demo's admin command %q: %v\n%s", fields, err, output)
		}
	}
}
