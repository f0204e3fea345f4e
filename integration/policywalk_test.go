package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The TestPolicy* tests walk every row of docs/design.md, "Rules", through the
// kernel, with one `shedfs serve` and three views (alice and bob in
// team-alpha, carol outside), asserting the exact errno of each attempt,
// and then that the audit trail names the denials with their rules.

// TestPolicyUploads: write, create, truncate, setattr, mkdir, symlink in
// uploads/ are EACCES; read, list, unlink, rmdir are allowed.
func TestPolicyUploads(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	src := t.TempDir()
	for _, n := range []string{"report.csv", "a.txt", "b.txt"} {
		mustWrite(t, filepath.Join(src, n), []byte("content of "+n), 0o644)
	}
	if _, errOut, code := runCLI(t, "import", "--help"); code != 0 {
		t.Fatalf("shedfs import --help: exit %d (%s): uploads/ cannot be filled", code, errOut)
	}
	adminOK(t, "import", "--user", "alice", "--store", s.Store, filepath.Join(src, "report.csv"))
	adminOK(t, "import", "--user", "alice", "--session", "sess", "--store", s.Store,
		filepath.Join(src, "a.txt"), filepath.Join(src, "b.txt"))
	up := s.In("alice", "uploads")
	f := filepath.Join(up, "report.csv")
	within2s(t, "imports visible in alice's uploads/", func() bool {
		_, e1 := os.Stat(f)
		_, e2 := os.Stat(filepath.Join(up, "sess", "b.txt"))
		return e1 == nil && e2 == nil
	})

	// Allowed: read and list.
	if got := string(mustRead(t, f)); got != "content of report.csv" {
		t.Errorf("read uploads/report.csv: %q", got)
	}
	if got := strings.Join(listNames(t, up), " "); got != "report.csv sess" {
		t.Errorf("ls uploads/: %q, want \"report.csv sess\"", got)
	}
	if got := getx(t, f, "user.shedfs.zone"); got != "uploads" {
		t.Errorf("user.shedfs.zone of an upload: %q, want uploads", got)
	}

	// Denied: EACCES for every change but removal.
	wantErrno(t, "open uploads/report.csv O_WRONLY", openWrite(f, 0), syscall.EACCES)
	wantErrno(t, "open uploads/report.csv O_RDWR", func() error {
		g, err := os.OpenFile(f, os.O_RDWR, 0)
		if err == nil {
			g.Close()
		}
		return err
	}(), syscall.EACCES)
	wantErrno(t, "open uploads/report.csv O_WRONLY|O_APPEND", openWrite(f, os.O_APPEND), syscall.EACCES)
	wantErrno(t, "open uploads/report.csv O_WRONLY|O_TRUNC", openWrite(f, os.O_TRUNC), syscall.EACCES)
	wantErrno(t, "truncate uploads/report.csv", os.Truncate(f, 0), syscall.EACCES)
	wantErrno(t, "create uploads/new.txt", openWrite(filepath.Join(up, "new.txt"), os.O_CREATE|os.O_EXCL), syscall.EACCES)
	wantErrno(t, "create uploads/sess/new.txt", openWrite(filepath.Join(up, "sess", "new.txt"), os.O_CREATE|os.O_EXCL), syscall.EACCES)
	wantErrno(t, "chmod uploads/report.csv", os.Chmod(f, 0o600), syscall.EACCES)
	wantErrno(t, "chown uploads/report.csv", os.Chown(f, 1000, 1000), syscall.EACCES)
	wantErrno(t, "setfattr user.color on uploads/report.csv", setx(f, "user.color", "red"), syscall.EACCES)
	wantErrno(t, "mkdir uploads/d", os.Mkdir(filepath.Join(up, "d"), 0o755), syscall.EACCES)
	wantErrno(t, "symlink uploads/l", os.Symlink("report.csv", filepath.Join(up, "l")), syscall.EACCES)
	wantErrno(t, "mkfifo uploads/p", unix.Mkfifo(filepath.Join(up, "p"), 0o644), syscall.EACCES)
	wantErrno(t, "link uploads/report.csv uploads/r2", os.Link(f, filepath.Join(up, "r2")), syscall.EACCES)
	wantErrno(t, "rename uploads/report.csv uploads/r2", os.Rename(f, filepath.Join(up, "r2")), syscall.EACCES)
	// Real tools.
	if out, code := tool(t, "cp", "/etc/hostname", up+"/"); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("cp /etc/hostname uploads/: exit %d %q, want a failure with Permission denied", code, out)
	}
	tarball := filepath.Join(t.TempDir(), "t.tar")
	runTool(t, src, nil, "tar", "-cf", tarball, "a.txt")
	if out, code := tool(t, "tar", "-C", up, "-xf", tarball); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("tar -x into uploads/: exit %d %q, want a failure with Permission denied", code, out)
	}
	if got := strings.Join(listNames(t, up), " "); got != "report.csv sess" {
		t.Errorf("uploads/ after the refused changes: %q, want \"report.csv sess\"", got)
	}
	if got := string(mustRead(t, f)); got != "content of report.csv" {
		t.Errorf("uploads/report.csv after the refused changes: %q", got)
	}

	// bob's uploads/ shows nothing of alice's.
	if got := listNames(t, s.In("bob", "uploads")); len(got) != 0 {
		t.Errorf("bob's uploads/ lists %v", got)
	}

	// Allowed: unlink and rmdir (rm -rf).
	wantErrno(t, "rmdir of a non-empty uploads/sess", os.Remove(filepath.Join(up, "sess")), syscall.ENOTEMPTY)
	wantOK(t, "unlink uploads/report.csv", os.Remove(f))
	wantOK(t, "unlink uploads/sess/a.txt", os.Remove(filepath.Join(up, "sess", "a.txt")))
	if out, code := tool(t, "rm", "-rf", filepath.Join(up, "sess")); code != 0 {
		t.Errorf("rm -rf uploads/sess: exit %d %s", code, out)
	}
	if got := listNames(t, up); len(got) != 0 {
		t.Errorf("uploads/ after rm: %v", got)
	}

	checkAudit(t, s.Store, []auditWant{
		{"alice", "uploads:alice", "create", "/uploads/new.txt", "EACCES", "uploads_readonly"},
		{"alice", "uploads:alice", "write", "/uploads/report.csv", "EACCES", "uploads_readonly"},
		{"alice", "uploads:alice", "symlink", "/uploads/l", "EACCES", "uploads_readonly"},
		{"alice", "uploads:alice", "setattr", "/uploads/report.csv", "EACCES", "uploads_readonly"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicyOwnerMode: a file in mode owner written or truncated by anyone
// but its owner is EACCES; unlinked, renamed, chmod'ed or re-moded, EPERM.
// In share/ and in groups/team-alpha/.
func TestPolicyOwnerMode(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, zone := range []struct{ dir, zone string }{
		{"share", "share"},
		{"groups/team-alpha", "group:team-alpha"},
	} {
		a := s.In("alice", zone.dir, "owned.txt")
		mustWrite(t, a, []byte("alice's"), 0o644)
		if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "owner", a); code != 0 {
			t.Fatalf("alice: setfattr -n user.shedfs.mode -v owner %s: exit %d %s", a, code, out)
		}
		others := []string{"bob"}
		if zone.dir == "share" {
			others = append(others, "carol")
		}
		for _, u := range others {
			p := s.In(u, zone.dir, "owned.txt")
			w := u + " on " + zone.dir + "/owned.txt (mode owner, owner alice): "
			if got, err := os.ReadFile(p); err != nil || string(got) != "alice's" {
				t.Errorf(w+"read: %q %v", got, err)
			}
			if got := getx(t, p, "user.shedfs.owner"); got != "alice" {
				t.Errorf(w+"user.shedfs.owner %q", got)
			}
			if got := getx(t, p, "user.shedfs.mode"); got != "owner" {
				t.Errorf(w+"user.shedfs.mode %q", got)
			}
			// write, truncate: EACCES.
			wantErrno(t, w+"open O_WRONLY", openWrite(p, 0), syscall.EACCES)
			wantErrno(t, w+"open O_WRONLY|O_APPEND", openWrite(p, os.O_APPEND), syscall.EACCES)
			wantErrno(t, w+"open O_WRONLY|O_TRUNC", openWrite(p, os.O_TRUNC), syscall.EACCES)
			wantErrno(t, w+"truncate", os.Truncate(p, 1), syscall.EACCES)
			// unlink, rename, setattr, set mode: EPERM.
			wantErrno(t, w+"unlink", os.Remove(p), syscall.EPERM)
			wantErrno(t, w+"rename", os.Rename(p, s.In(u, zone.dir, "stolen.txt")), syscall.EPERM)
			mine := s.In(u, zone.dir, u+"-file.txt")
			mustWrite(t, mine, []byte(u), 0o644)
			wantErrno(t, w+"rename over it", os.Rename(mine, p), syscall.EPERM)
			wantErrno(t, w+"chmod", os.Chmod(p, 0o666), syscall.EPERM)
			wantErrno(t, w+"chown", os.Chown(p, 1000, 1000), syscall.EPERM)
			wantErrno(t, w+"setfattr user.color", setx(p, "user.color", "red"), syscall.EPERM)
			wantErrno(t, w+"setfattr user.shedfs.mode group", setx(p, "user.shedfs.mode", "group"), syscall.EPERM)
			wantErrno(t, w+"setfattr user.shedfs.owner "+u, setx(p, "user.shedfs.owner", u), syscall.EPERM)
			// The same through the tools.
			if out, code := tool(t, "rm", "-f", p); code == 0 || !strings.Contains(out, "Operation not permitted") {
				t.Errorf(w+"rm -f: exit %d %q, want Operation not permitted", code, out)
			}
			if out, code := tool(t, "mv", p, s.In(u, zone.dir, "moved.txt")); code == 0 || !strings.Contains(out, "Operation not permitted") {
				t.Errorf(w+"mv: exit %d %q, want Operation not permitted", code, out)
			}
			if out, code := tool(t, "cp", "/etc/hostname", p); code == 0 || !strings.Contains(out, "Permission denied") {
				t.Errorf(w+"cp over it: exit %d %q, want Permission denied", code, out)
			}
			if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "group", p); code == 0 || !strings.Contains(out, "Operation not permitted") {
				t.Errorf(w+"setfattr user.shedfs.mode: exit %d %q, want Operation not permitted", code, out)
			}
			wantOK(t, "remove "+mine, os.Remove(mine))
		}
		// Nothing changed; the owner still does everything.
		if got := string(mustRead(t, a)); got != "alice's" {
			t.Errorf("%s/owned.txt after the refused changes: %q", zone.dir, got)
		}
		wantOK(t, "alice writes her owner-mode file", writeFile(a, []byte("ALICE")))
		wantOK(t, "alice truncates her owner-mode file", os.Truncate(a, 3))
		wantOK(t, "alice chmods her owner-mode file", os.Chmod(a, 0o640))
		if got := string(mustRead(t, s.In("bob", zone.dir, "owned.txt"))); got != "ALI" {
			t.Errorf("bob reads %s/owned.txt after alice's write: %q, want ALI", zone.dir, got)
		}
		wantOK(t, "alice renames her owner-mode file", os.Rename(a, s.In("alice", zone.dir, "owned2.txt")))
		wantOK(t, "alice removes her owner-mode file", os.Remove(s.In("alice", zone.dir, "owned2.txt")))
	}
	checkAudit(t, s.Store, []auditWant{
		{"bob", "share", "write", "/share/owned.txt", "EACCES", "owner_only"},
		{"bob", "share", "unlink", "/share/owned.txt", "EPERM", "owner_only"},
		{"carol", "share", "truncate", "/share/owned.txt", "EACCES", "owner_only"},
		{"bob", "group:team-alpha", "rename", "/groups/team-alpha/owned.txt", "EPERM", "owner_only"},
		{"bob", "group:team-alpha", "set_mode", "/groups/team-alpha/owned.txt", "EPERM", "owner_only"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicyOwnerRO: anything but reading an owner_ro file is EPERM, for
// its owner too; the owner may set the mode back, and then write.
func TestPolicyOwnerRO(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, dir := range []string{"share", "groups/team-alpha"} {
		a := s.In("alice", dir, "ro.txt")
		mustWrite(t, a, []byte("frozen"), 0o644)
		wantOK(t, "alice sets owner_ro", setx(a, "user.shedfs.mode", "owner_ro"))
		for _, u := range []string{"alice", "bob"} {
			p := s.In(u, dir, "ro.txt")
			w := u + " on " + dir + "/ro.txt (owner_ro, owner alice): "
			if got, err := os.ReadFile(p); err != nil || string(got) != "frozen" {
				t.Errorf(w+"read: %q %v", got, err)
			}
			wantErrno(t, w+"open O_WRONLY", openWrite(p, 0), syscall.EPERM)
			wantErrno(t, w+"open O_WRONLY|O_TRUNC", openWrite(p, os.O_TRUNC), syscall.EPERM)
			wantErrno(t, w+"truncate", os.Truncate(p, 0), syscall.EPERM)
			wantErrno(t, w+"unlink", os.Remove(p), syscall.EPERM)
			wantErrno(t, w+"rename", os.Rename(p, s.In(u, dir, "ro2.txt")), syscall.EPERM)
			wantErrno(t, w+"chmod", os.Chmod(p, 0o600), syscall.EPERM)
			wantErrno(t, w+"setfattr user.color", setx(p, "user.color", "red"), syscall.EPERM)
			wantErrno(t, w+"setfattr user.shedfs.owner bob", setx(p, "user.shedfs.owner", "bob"), syscall.EPERM)
			if u != "alice" {
				wantErrno(t, w+"setfattr user.shedfs.mode group", setx(p, "user.shedfs.mode", "group"), syscall.EPERM)
			}
		}
		if got := string(mustRead(t, a)); got != "frozen" {
			t.Errorf("%s/ro.txt after the refused changes: %q", dir, got)
		}
		// The owner sets the mode back; then writes work again.
		if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "group", a); code != 0 {
			t.Errorf("alice: setfattr user.shedfs.mode group on her owner_ro file: exit %d %s", code, out)
		}
		wantOK(t, "alice writes after setting the mode back", writeFile(a, []byte("thawed")))
		wantOK(t, "bob writes the group-mode file", writeFile(s.In("bob", dir, "ro.txt"), []byte("THAWED")))
		wantOK(t, "bob removes the group-mode file", os.Remove(s.In("bob", dir, "ro.txt")))
	}
	checkAudit(t, s.Store, []auditWant{
		{"alice", "share", "write", "/share/ro.txt", "EPERM", "owner_ro"},
		{"alice", "share", "unlink", "/share/ro.txt", "EPERM", "owner_ro"},
		{"bob", "group:team-alpha", "truncate", "/groups/team-alpha/ro.txt", "EPERM", "owner_ro"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicyDirModes: creating, removing or renaming entries inside a
// directory whose mode forbids the caller is EACCES; in a group-mode
// directory everyone in the zone writes and deletes.
func TestPolicyDirModes(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, dir := range []string{"share", "groups/team-alpha"} {
		ad := s.In("alice", dir, "adir")
		mustMkdir(t, ad, 0o755)
		mustWrite(t, filepath.Join(ad, "inner.txt"), []byte("inner"), 0o644)
		mustMkdir(t, filepath.Join(ad, "sub"), 0o755)
		wantOK(t, "alice sets her directory to mode owner", setx(ad, "user.shedfs.mode", "owner"))
		bd := s.In("bob", dir, "adir")
		bobFile := s.In("bob", dir, "bob.txt")
		mustWrite(t, bobFile, []byte("bob"), 0o644)
		w := "bob in " + dir + "/adir (mode owner, owner alice): "
		wantErrno(t, w+"create", openWrite(filepath.Join(bd, "b.txt"), os.O_CREATE|os.O_EXCL), syscall.EACCES)
		wantErrno(t, w+"mkdir", os.Mkdir(filepath.Join(bd, "bd"), 0o755), syscall.EACCES)
		wantErrno(t, w+"symlink", os.Symlink("inner.txt", filepath.Join(bd, "l")), syscall.EACCES)
		wantErrno(t, w+"mkfifo", unix.Mkfifo(filepath.Join(bd, "fifo"), 0o644), syscall.EACCES)
		wantErrno(t, w+"link into it", os.Link(bobFile, filepath.Join(bd, "hl")), syscall.EACCES)
		wantErrno(t, w+"unlink inner.txt", os.Remove(filepath.Join(bd, "inner.txt")), syscall.EACCES)
		wantErrno(t, w+"rmdir sub", os.Remove(filepath.Join(bd, "sub")), syscall.EACCES)
		wantErrno(t, w+"rename inside", os.Rename(filepath.Join(bd, "inner.txt"), filepath.Join(bd, "x.txt")), syscall.EACCES)
		wantErrno(t, w+"rename out", os.Rename(filepath.Join(bd, "inner.txt"), s.In("bob", dir, "x.txt")), syscall.EACCES)
		wantErrno(t, w+"rename in", os.Rename(bobFile, filepath.Join(bd, "bob.txt")), syscall.EACCES)
		wantErrno(t, w+"rmdir adir itself", os.Remove(bd), syscall.EPERM)
		if out, code := tool(t, "cp", "/etc/hostname", bd+"/"); code == 0 || !strings.Contains(out, "Permission denied") {
			t.Errorf(w+"cp into it: exit %d %q, want Permission denied", code, out)
		}
		if out, code := tool(t, "rm", "-rf", bd); code == 0 || !strings.Contains(out, "Permission denied") {
			t.Errorf(w+"rm -rf: exit %d %q, want Permission denied", code, out)
		}
		// The file inside is in mode group: its content is everyone's.
		wantOK(t, w+"write inner.txt (mode group)", writeFile(filepath.Join(bd, "inner.txt"), []byte("INNER")))
		if got := strings.Join(listNames(t, ad), " "); got != "inner.txt sub" {
			t.Errorf("%s/adir after bob's refused changes: %q", dir, got)
		}
		// The owner changes the directory.
		wantOK(t, "alice creates in her owner-mode dir", os.WriteFile(filepath.Join(ad, "a2.txt"), nil, 0o644))
		wantOK(t, "alice renames in her owner-mode dir", os.Rename(filepath.Join(ad, "a2.txt"), filepath.Join(ad, "a3.txt")))
		wantOK(t, "alice removes in her owner-mode dir", os.Remove(filepath.Join(ad, "a3.txt")))

		// owner_ro directory: nobody adds or removes, owner included.
		wantOK(t, "alice sets her directory owner_ro", setx(ad, "user.shedfs.mode", "owner_ro"))
		for _, u := range []string{"alice", "bob"} {
			d := s.In(u, dir, "adir")
			w := u + " in " + dir + "/adir (owner_ro): "
			wantErrno(t, w+"create", openWrite(filepath.Join(d, "n.txt"), os.O_CREATE|os.O_EXCL), syscall.EACCES)
			wantErrno(t, w+"mkdir", os.Mkdir(filepath.Join(d, "nd"), 0o755), syscall.EACCES)
			wantErrno(t, w+"unlink", os.Remove(filepath.Join(d, "inner.txt")), syscall.EACCES)
			wantErrno(t, w+"rename inside", os.Rename(filepath.Join(d, "inner.txt"), filepath.Join(d, "y.txt")), syscall.EACCES)
		}
		wantOK(t, "alice sets her directory back to group", setx(ad, "user.shedfs.mode", "group"))

		// Group mode: bob adds, renames, removes, and so does alice.
		wantOK(t, "bob creates in a group-mode dir", os.WriteFile(filepath.Join(bd, "b.txt"), []byte("b"), 0o644))
		wantOK(t, "bob renames alice's file in a group-mode dir", os.Rename(filepath.Join(bd, "inner.txt"), filepath.Join(bd, "renamed.txt")))
		wantOK(t, "bob truncates alice's group-mode file", os.Truncate(filepath.Join(bd, "renamed.txt"), 2))
		wantOK(t, "bob chmods alice's group-mode file", os.Chmod(filepath.Join(bd, "renamed.txt"), 0o600))
		if got := string(mustRead(t, filepath.Join(ad, "renamed.txt"))); got != "IN" {
			t.Errorf("alice reads %q after bob's truncate", got)
		}
		if out, code := tool(t, "rm", "-rf", bd); code != 0 {
			t.Errorf("bob: rm -rf %s/adir in group mode: exit %d %s", dir, code, out)
		}
		if _, err := os.Lstat(ad); !os.IsNotExist(err) {
			t.Errorf("alice's %s/adir after bob's rm -rf: %v", dir, err)
		}
		wantOK(t, "bob removes his file", os.Remove(bobFile))
	}
	// carol, outside team-alpha but in share, writes and deletes a
	// group-mode file of alice's there.
	mustWrite(t, s.In("alice", "share", "common.txt"), []byte("a"), 0o644)
	wantOK(t, "carol writes alice's group-mode share file", writeFile(s.In("carol", "share", "common.txt"), []byte("c")))
	tarball := filepath.Join(t.TempDir(), "tree.tar")
	tree := filepath.Join(t.TempDir(), "tree")
	makeTree(t, tree)
	runTool(t, tree, nil, "tar", "-cf", tarball, ".")
	mustMkdir(t, s.In("alice", "share", "tree"), 0o755)
	runTool(t, "", nil, "tar", "-C", s.In("carol", "share", "tree"), "-xf", tarball)
	runTool(t, "", nil, "rm", "-rf", s.In("bob", "share", "tree"))
	wantOK(t, "carol removes alice's group-mode share file", os.Remove(s.In("carol", "share", "common.txt")))

	checkAudit(t, s.Store, []auditWant{
		{"bob", "share", "create", "/share/adir/b.txt", "EACCES", "dir_mode"},
		{"bob", "group:team-alpha", "unlink", "/groups/team-alpha/adir/inner.txt", "EACCES", "dir_mode"},
		{"alice", "share", "create", "/share/adir/n.txt", "EACCES", "dir_mode"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicyCrossZone: rename and hard link across zones are EXDEV, so mv
// copies; the copy meets the target zone's rules.
func TestPolicyCrossZone(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "up.txt"), []byte("uploaded"), 0o644)
	adminOK(t, "import", "--user", "alice", "--store", s.Store, filepath.Join(src, "up.txt"))
	A := func(p ...string) string { return s.In("alice", p...) }
	mustWrite(t, A("p.txt"), []byte("private"), 0o644)
	mustWrite(t, A("output", "o.txt"), []byte("output"), 0o644)
	mustWrite(t, A("share", "s.txt"), []byte("share"), 0o644)
	mustWrite(t, A("groups", "team-alpha", "g.txt"), []byte("group"), 0o644)
	mustMkdir(t, A("share", "sd"), 0o755)
	mustMkdir(t, A("pd"), 0o755)
	within2s(t, "imported up.txt in alice's view", func() bool { _, err := os.Stat(A("uploads", "up.txt")); return err == nil })

	for _, c := range []struct {
		from, to string
		link     bool
	}{
		{"p.txt", "share/p.txt", true},
		{"p.txt", "output/p.txt", true},
		{"p.txt", "groups/team-alpha/p.txt", true},
		{"output/o.txt", "o.txt", true},
		{"share/s.txt", "groups/team-alpha/s.txt", true},
		{"share/s.txt", "s.txt", true},
		{"groups/team-alpha/g.txt", "share/g.txt", true},
		{"uploads/up.txt", "up.txt", true},
		{"share/sd", "groups/team-alpha/sd", false},
		{"pd", "share/pd", false},
		{"p.txt", "share/s.txt", false}, // replacing an entry of the other zone
	} {
		wantErrno(t, "alice: rename "+c.from+" "+c.to, os.Rename(A(c.from), A(c.to)), syscall.EXDEV)
		if c.link {
			wantErrno(t, "alice: link "+c.from+" "+c.to, os.Link(A(c.from), A(c.to)), syscall.EXDEV)
		}
	}
	// Link into uploads: EXDEV (the cross-zone rule comes first).
	wantErrno(t, "alice: link p.txt uploads/p.txt", os.Link(A("p.txt"), A("uploads", "p.txt")), syscall.EXDEV)

	// mv copies across zones; the copy takes the target zone's rules.
	if out, code := tool(t, "mv", A("p.txt"), A("share")+"/"); code != 0 {
		t.Errorf("mv p.txt share/: exit %d %s", code, out)
	}
	if _, err := os.Lstat(A("p.txt")); !os.IsNotExist(err) {
		t.Errorf("p.txt still in private after mv: %v", err)
	}
	if got := string(mustRead(t, s.In("bob", "share", "p.txt"))); got != "private" {
		t.Errorf("bob reads share/p.txt moved by alice: %q", got)
	}
	for name, want := range map[string]string{"user.shedfs.zone": "share", "user.shedfs.owner": "alice", "user.shedfs.mode": "group"} {
		if got := getx(t, A("share", "p.txt"), name); got != want {
			t.Errorf("share/p.txt after mv: %s = %q, want %q", name, got, want)
		}
	}
	mustMkdir(t, A("pd", "deep"), 0o755)
	mustWrite(t, A("pd", "deep", "f.txt"), []byte("deep"), 0o644)
	if out, code := tool(t, "mv", A("pd"), A("groups", "team-alpha")+"/"); code != 0 {
		t.Errorf("mv pd groups/team-alpha/: exit %d %s", code, out)
	}
	if got := getx(t, s.In("bob", "groups", "team-alpha", "pd", "deep", "f.txt"), "user.shedfs.zone"); got != "group:team-alpha" {
		t.Errorf("zone of a file moved into the group by mv: %q", got)
	}
	// mv into uploads/: the copy is refused, the source stays.
	mustWrite(t, A("q.txt"), []byte("q"), 0o644)
	if out, code := tool(t, "mv", A("q.txt"), A("uploads")+"/"); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("mv q.txt uploads/: exit %d %q, want a failure with Permission denied", code, out)
	}
	if got := string(mustRead(t, A("q.txt"))); got != "q" {
		t.Errorf("q.txt after a refused mv into uploads/: %q", got)
	}
	if _, err := os.Lstat(A("uploads", "q.txt")); !os.IsNotExist(err) {
		t.Errorf("uploads/q.txt after a refused mv: %v", err)
	}
	// mv of bob's owner-mode share file into alice's private: the copy is
	// made, the removal of the source is refused (EPERM), mv fails.
	bobs := s.In("bob", "share", "bobs.txt")
	mustWrite(t, bobs, []byte("bob's"), 0o644)
	wantOK(t, "bob sets mode owner", setx(bobs, "user.shedfs.mode", "owner"))
	if out, code := tool(t, "mv", A("share", "bobs.txt"), A("taken.txt")); code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("alice: mv share/bobs.txt (bob's, mode owner) to private: exit %d %q, want Operation not permitted", code, out)
	}
	if got := string(mustRead(t, bobs)); got != "bob's" {
		t.Errorf("bob's file after alice's refused mv: %q", got)
	}
	// cp -a from private to share and to output works.
	makeTree(t, A("tree"))
	runTool(t, "", nil, "cp", "-a", A("tree"), A("share", "tree"))
	runTool(t, "", nil, "cp", "-a", A("tree"), A("output", "tree"))
	runTool(t, "", nil, "diff", "-r", "--no-dereference", A("tree"), s.In("carol", "share", "tree"))

	checkAudit(t, s.Store, []auditWant{
		{"alice", "private:alice", "rename", "/p.txt", "EXDEV", "cross_zone"},
		{"alice", "group:team-alpha", "link", "/groups/team-alpha/s.txt", "EXDEV", "cross_zone"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicySymlinks: with the default policy shared-in-zone, a link in
// share/ or a group whose target is absolute or climbs out of its zone is
// EPERM, in-zone relative targets work; in the user's own zones any
// target works, absolute ones included.
func TestPolicySymlinks(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", p...) }
	mustWrite(t, A("p.txt"), []byte("private"), 0o644)
	mustMkdir(t, A("pd"), 0o755)
	mustWrite(t, A("share", "x.txt"), []byte("x"), 0o644)
	mustMkdir(t, A("share", "d"), 0o755)
	mustWrite(t, A("groups", "team-alpha", "g.txt"), []byte("g"), 0o644)
	mustMkdir(t, A("groups", "team-alpha", "gd"), 0o755)
	hostFile := filepath.Join(t.TempDir(), "host.txt")
	mustWrite(t, hostFile, []byte("host"), 0o644)
	// Under the default policy (shared-in-zone) a link in share/ or a
	// group, which other users' processes follow, may not leave its zone.
	for _, c := range []struct{ target, link string }{
		{"/etc/passwd", "share/abs"},
		{"/", "groups/team-alpha/abs"},
		{s.In("alice", "p.txt"), "share/abs2"},
		{"../p.txt", "share/up"},
		{"../../p.txt", "share/d/up"},
		{"../team-alpha/g.txt", "groups/team-alpha/up"},
		{"../../share/x.txt", "groups/team-alpha/gd/up"},
		{"d/../../p.txt", "share/dotdot"},
		{"./../x.txt", "share/d/../d/../dot"},
		{"../../../../../../etc/passwd", "share/d/far"},
	} {
		wantErrno(t, "alice: ln -s "+c.target+" "+c.link, os.Symlink(c.target, A(c.link)), syscall.EPERM)
	}
	if out, code := tool(t, "ln", "-s", "/etc/passwd", A("share", "abs-tool")); code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("ln -s /etc/passwd share/abs-tool: exit %d %q, want Operation not permitted", code, out)
	}
	for _, c := range []struct{ target, link, content string }{
		{"x.txt", "share/ok", "x"},
		{"../x.txt", "share/d/ok", "x"},
		{"./x.txt", "share/ok2", "x"},
		{"g.txt", "groups/team-alpha/ok", "g"},
		{"../g.txt", "groups/team-alpha/gd/ok", "g"},
		{"p.txt", "ok", "private"},
		{"../p.txt", "pd/ok", "private"},
		// In alice's own zones, which only her processes follow, any
		// target (issue 27: python -m venv links to /usr/bin).
		{hostFile, "abs", "host"},
		{s.In("alice", "p.txt"), "abs2", "private"},
		{"../p.txt", "output/up", "private"},
		{"../../alice/p.txt", "pd/up", "private"}, // out of the view and back
	} {
		if !wantOK(t, "alice: ln -s "+c.target+" "+c.link, os.Symlink(c.target, A(c.link))) {
			continue
		}
		if got, err := os.Readlink(A(c.link)); err != nil || got != c.target {
			t.Errorf("readlink %s: %q %v, want %q", c.link, got, err, c.target)
		}
		if got, err := os.ReadFile(A(c.link)); err != nil || string(got) != c.content {
			t.Errorf("reading through %s: %q %v, want %q", c.link, got, err, c.content)
		}
	}
	// bob follows alice's in-zone share link in his view.
	if got, err := os.ReadFile(s.In("bob", "share", "d", "ok")); err != nil || string(got) != "x" {
		t.Errorf("bob reads through share/d/ok: %q %v", got, err)
	}
	checkAudit(t, s.Store, []auditWant{
		{"alice", "share", "symlink", "/share/abs", "EPERM", "symlink_policy"},
		{"alice", "share", "symlink", "/share/d/up", "EPERM", "symlink_policy"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicyReservedNames: the reserved root names cannot be removed,
// renamed or replaced (EPERM) nor created (EEXIST); nothing is created
// directly in groups/ (EACCES); a name of 256 bytes is ENAMETOOLONG.
func TestPolicyReservedNames(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", p...) }
	mustMkdir(t, A("x"), 0o755)
	mustWrite(t, A("f.txt"), []byte("f"), 0o644)
	for _, name := range reservedNames {
		wantErrno(t, "alice: rmdir "+name, os.Remove(A(name)), syscall.EPERM)
		wantErrno(t, "alice: unlinkat(AT_REMOVEDIR) "+name, unix.Unlinkat(unix.AT_FDCWD, A(name), unix.AT_REMOVEDIR), syscall.EPERM)
		wantErrno(t, "alice: rename "+name+" renamed", os.Rename(A(name), A("renamed")), syscall.EPERM)
		// unix.Rename: os.Rename refuses by itself (EEXIST) to rename onto
		// an existing directory, before any system call.
		wantErrno(t, "alice: rename x "+name+" (replace)", unix.Rename(A("x"), A(name)), syscall.EPERM)
		// A file onto a directory: the kernel answers EISDIR before
		// asking the daemon.
		wantErrno(t, "alice: rename f.txt "+name+" (replace)", unix.Rename(A("f.txt"), A(name)), syscall.EISDIR)
		wantErrno(t, "alice: renameat2 RENAME_EXCHANGE x "+name,
			unix.Renameat2(unix.AT_FDCWD, A("x"), unix.AT_FDCWD, A(name), unix.RENAME_EXCHANGE), syscall.EPERM)
		wantErrno(t, "alice: mkdir "+name, os.Mkdir(A(name), 0o755), syscall.EEXIST)
		wantErrno(t, "alice: open "+name+" O_CREAT|O_EXCL", openWrite(A(name), os.O_CREATE|os.O_EXCL), syscall.EEXIST)
		wantErrno(t, "alice: symlink x "+name, os.Symlink("x", A(name)), syscall.EEXIST)
		wantErrno(t, "alice: link f.txt "+name, os.Link(A("f.txt"), A(name)), syscall.EEXIST)
		wantErrno(t, "alice: mkfifo "+name, unix.Mkfifo(A(name), 0o644), syscall.EEXIST)
		if out, code := tool(t, "mv", A(name), A("moved")); code == 0 || !strings.Contains(out, "Operation not permitted") {
			t.Errorf("alice: mv %s moved: exit %d %q, want Operation not permitted", name, code, out)
		}
	}
	// rm -rf of the (empty) reserved folders: refused at the rmdir.
	for _, name := range []string{"output", "uploads", "share"} {
		if out, code := tool(t, "rm", "-rf", A(name)); code == 0 || !strings.Contains(out, "Operation not permitted") {
			t.Errorf("alice: rm -rf %s: exit %d %q, want Operation not permitted", name, code, out)
		}
	}
	if got := strings.Join(listNames(t, A()), " "); got != "f.txt groups output share snapshots trash uploads x" {
		t.Errorf("alice's root after the refused changes: %q", got)
	}
	// groups/ is read-only: nothing is created in it.
	g := A("groups")
	wantErrno(t, "alice: create groups/new", openWrite(filepath.Join(g, "new"), os.O_CREATE|os.O_EXCL), syscall.EACCES)
	wantErrno(t, "alice: mkdir groups/team-beta", os.Mkdir(filepath.Join(g, "team-beta"), 0o755), syscall.EACCES)
	wantErrno(t, "alice: symlink groups/l", os.Symlink("team-alpha", filepath.Join(g, "l")), syscall.EACCES)
	wantErrno(t, "alice: mkfifo groups/p", unix.Mkfifo(filepath.Join(g, "p"), 0o644), syscall.EACCES)
	wantErrno(t, "alice: link f.txt groups/f.txt", os.Link(A("f.txt"), filepath.Join(g, "f.txt")), syscall.EACCES)
	wantErrno(t, "alice: rename x groups/x", os.Rename(A("x"), filepath.Join(g, "x")), syscall.EACCES)
	wantErrno(t, "alice: mkdir groups/team-alpha", os.Mkdir(filepath.Join(g, "team-alpha"), 0o755), syscall.EEXIST)
	wantErrno(t, "alice: rmdir groups/team-alpha", os.Remove(filepath.Join(g, "team-alpha")), syscall.EACCES)
	wantErrno(t, "alice: rename groups/team-alpha groups/team-x", os.Rename(filepath.Join(g, "team-alpha"), filepath.Join(g, "team-x")), syscall.EACCES)
	if out, code := tool(t, "cp", A("f.txt"), g+"/"); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("alice: cp f.txt groups/: exit %d %q, want Permission denied", code, out)
	}
	wantErrno(t, "carol: mkdir groups/team-alpha", os.Mkdir(s.In("carol", "groups", "team-alpha"), 0o755), syscall.EACCES)
	if got := strings.Join(listNames(t, g), " "); got != "team-alpha" {
		t.Errorf("alice's groups/ after the refused changes: %q", got)
	}

	// Names: 255 bytes is fine, 256 is ENAMETOOLONG, in every zone.
	n255, n256 := strings.Repeat("n", 255), strings.Repeat("n", 256)
	for _, dir := range []string{"", "output", "share", "groups/team-alpha"} {
		d := A(dir)
		wantOK(t, "alice: create a 255-byte name in /"+dir, os.WriteFile(filepath.Join(d, n255), nil, 0o644))
		wantErrno(t, "alice: create a 256-byte name in /"+dir, openWrite(filepath.Join(d, n256), os.O_CREATE|os.O_EXCL), syscall.ENAMETOOLONG)
		wantErrno(t, "alice: mkdir a 256-byte name in /"+dir, os.Mkdir(filepath.Join(d, n256), 0o755), syscall.ENAMETOOLONG)
		wantErrno(t, "alice: symlink a 256-byte name in /"+dir, os.Symlink("x", filepath.Join(d, n256)), syscall.ENAMETOOLONG)
		wantErrno(t, "alice: rename to a 256-byte name in /"+dir, os.Rename(filepath.Join(d, n255), filepath.Join(d, n256)), syscall.ENAMETOOLONG)
		wantErrno(t, "alice: link to a 256-byte name in /"+dir, os.Link(filepath.Join(d, n255), filepath.Join(d, n256)), syscall.ENAMETOOLONG)
		wantOK(t, "alice: remove the 255-byte name in /"+dir, os.Remove(filepath.Join(d, n255)))
	}
	t.Log("names with '/' or NUL (EINVAL) cannot be sent through the kernel's path walk; acl and zones table tests cover them")

	checkAudit(t, s.Store, []auditWant{
		{"alice", "private:alice", "rmdir", "/output", "EPERM", "reserved_name"},
		{"alice", "private:alice", "rename", "/x", "EPERM", "reserved_name"},
		{"alice", "*", "create", "/groups/new", "EACCES", "groups_readonly"},
		// The kernel looks a name up before it creates it, so the refusal is
		// recorded as the lookup that met it.
		{"alice", "share", "lookup", "/share/" + n256, "ENAMETOOLONG", "name_too_long"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// TestPolicyXattrs: user.shedfs.owner, .mode and .zone read back in every
// view; the owner sets the mode, anyone else gets EPERM, a bad value
// EINVAL; ownership goes to a member of the zone only (EINVAL otherwise);
// the zone is read-only (EPERM).
func TestPolicyXattrs(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	ga := s.In("alice", "groups", "team-alpha", "x.txt")
	gb := s.In("bob", "groups", "team-alpha", "x.txt")
	sa := s.In("alice", "share", "y.txt")
	mustWrite(t, ga, []byte("x"), 0o644)
	mustWrite(t, sa, []byte("y"), 0o644)
	getf := func(path, name string) string {
		t.Helper()
		out, code := tool(t, "getfattr", "--absolute-names", "--only-values", "-n", name, path)
		if code != 0 {
			t.Errorf("getfattr -n %s %s: exit %d %s", name, path, code, out)
		}
		return out
	}
	for _, c := range []struct{ path, name, want string }{
		{gb, "user.shedfs.owner", "alice"},
		{gb, "user.shedfs.mode", "group"},
		{gb, "user.shedfs.zone", "group:team-alpha"},
		{ga, "user.shedfs.zone", "group:team-alpha"},
		{s.In("carol", "share", "y.txt"), "user.shedfs.owner", "alice"},
		{s.In("carol", "share", "y.txt"), "user.shedfs.mode", "group"},
		{s.In("carol", "share", "y.txt"), "user.shedfs.zone", "share"},
		{s.In("bob", "share"), "user.shedfs.zone", "share"},
		{s.In("bob", "groups", "team-alpha"), "user.shedfs.zone", "group:team-alpha"},
	} {
		if got := getf(c.path, c.name); got != c.want {
			t.Errorf("getfattr -n %s %s: %q, want %q", c.name, c.path, got, c.want)
		}
	}
	// The owner sets the mode (setfattr); bob sees it; bob may not.
	if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "owner", ga); code != 0 {
		t.Errorf("alice: setfattr -n user.shedfs.mode -v owner: exit %d %s", code, out)
	}
	if got := getf(gb, "user.shedfs.mode"); got != "owner" {
		t.Errorf("bob: mode after alice set owner: %q", got)
	}
	if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "group", gb); code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("bob: setfattr user.shedfs.mode on alice's file: exit %d %q, want Operation not permitted", code, out)
	}
	wantErrno(t, "bob: set user.shedfs.mode on alice's file", setx(gb, "user.shedfs.mode", "group"), syscall.EPERM)
	wantErrno(t, "bob: set user.shedfs.owner on alice's file", setx(gb, "user.shedfs.owner", "bob"), syscall.EPERM)
	wantErrno(t, "carol: set user.shedfs.mode on alice's share file", setx(s.In("carol", "share", "y.txt"), "user.shedfs.mode", "owner"), syscall.EPERM)
	// Bad values.
	for _, v := range []string{"bogus", "", "OWNER", "owner ", "group\n"} {
		wantErrno(t, "alice: set user.shedfs.mode "+strconvQuote(v), setx(ga, "user.shedfs.mode", v), syscall.EINVAL)
	}
	if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "everyone", ga); code == 0 || !strings.Contains(out, "Invalid argument") {
		t.Errorf("alice: setfattr user.shedfs.mode everyone: exit %d %q, want Invalid argument", code, out)
	}
	// Ownership: carol is no member of team-alpha, zed is nobody.
	for _, who := range []string{"carol", "zed", "Bad Name", ""} {
		wantErrno(t, "alice: set user.shedfs.owner "+strconvQuote(who)+" in team-alpha", setx(ga, "user.shedfs.owner", who), syscall.EINVAL)
	}
	if got := getf(gb, "user.shedfs.owner"); got != "alice" {
		t.Errorf("owner after refused transfers: %q", got)
	}
	wantErrno(t, "alice: set user.shedfs.zone", setx(ga, "user.shedfs.zone", "share"), syscall.EPERM)
	wantErrno(t, "bob: set user.shedfs.zone", setx(gb, "user.shedfs.zone", "group:team-alpha"), syscall.EPERM)
	wantErrno(t, "alice: set user.shedfs.zone on a private file", func() error {
		mustWrite(t, s.In("alice", "p.txt"), nil, 0o644)
		return setx(s.In("alice", "p.txt"), "user.shedfs.zone", "share")
	}(), syscall.EPERM)
	if out, code := tool(t, "setfattr", "-n", "user.shedfs.zone", "-v", "share", ga); code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("alice: setfattr user.shedfs.zone: exit %d %q, want Operation not permitted", code, out)
	}
	// Transfer to bob (a member): bob now owns it, alice may no longer
	// write nor set the mode.
	if out, code := tool(t, "setfattr", "-n", "user.shedfs.owner", "-v", "bob", ga); code != 0 {
		t.Errorf("alice: setfattr user.shedfs.owner bob: exit %d %s", code, out)
	}
	for _, p := range []string{ga, gb} {
		if got := getf(p, "user.shedfs.owner"); got != "bob" {
			t.Errorf("owner of %s after the transfer: %q, want bob", p, got)
		}
	}
	wantErrno(t, "alice: write the file she gave bob (mode owner)", openWrite(ga, 0), syscall.EACCES)
	wantErrno(t, "alice: set the mode of the file she gave bob", setx(ga, "user.shedfs.mode", "group"), syscall.EPERM)
	wantOK(t, "bob: write the file he was given", writeFile(gb, []byte("B")))
	wantOK(t, "bob: set its mode back to group", setx(gb, "user.shedfs.mode", "group"))
	// In share/, any user may receive ownership.
	wantOK(t, "alice: give share/y.txt to carol", setx(sa, "user.shedfs.owner", "carol"))
	if got := getf(s.In("bob", "share", "y.txt"), "user.shedfs.owner"); got != "carol" {
		t.Errorf("owner of share/y.txt after the transfer to carol: %q", got)
	}
	wantErrno(t, "carol: give share/y.txt to zed (no such user)", setx(s.In("carol", "share", "y.txt"), "user.shedfs.owner", "zed"), syscall.EINVAL)

	checkAudit(t, s.Store, []auditWant{
		{"bob", "group:team-alpha", "set_mode", "/groups/team-alpha/x.txt", "EPERM", "owner_only"},
		{"alice", "group:team-alpha", "set_mode", "/groups/team-alpha/x.txt", "EINVAL", "xattr_bad_value"},
		{"alice", "group:team-alpha", "set_owner", "/groups/team-alpha/x.txt", "EINVAL", "not_member"},
		{"alice", "group:team-alpha", "set_zone_xattr", "/groups/team-alpha/x.txt", "EPERM", "xattr_readonly"},
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// strconvQuote quotes s for messages.
func strconvQuote(s string) string { return "\"" + strings.ReplaceAll(s, "\n", `\n`) + "\"" }
