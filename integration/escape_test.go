package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Escape attempts from bob's and carol's views into alice's private,
// output and uploads zones: every one fails, and no name of alice's leaks
// through a listing, a link, an xattr or an error message. (A symlink in
// a user's own zones may name any target: the kernel follows it in the
// reader's namespace, and only that user's processes read it.)

// aliceSecrets are names only alice's private zones hold.
var aliceSecrets = []string{"alice-secret-7f3a", "alice-diary-91c2", "alice-report-5d0e", "alice-upload-c4b8"}

// leaks fails the test if text names one of alice's private files.
func leaks(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range aliceSecrets {
		if strings.Contains(text, s) {
			t.Errorf("%s leaks alice's private name %q:\n%s", what, s, truncate([]byte(text), 2000))
		}
	}
}

// TestEscape tries every way out of bob's and carol's views into alice's
// private zones.
func TestEscape(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", p...) }
	mustWrite(t, A(aliceSecrets[0]), []byte("top secret"), 0o600)
	mustMkdir(t, A(aliceSecrets[1]), 0o700)
	mustWrite(t, A(aliceSecrets[1], "entry"), []byte("dear diary"), 0o600)
	mustWrite(t, A("output", aliceSecrets[2]), []byte("report"), 0o644)
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, aliceSecrets[3]), []byte("upload"), 0o644)
	adminOK(t, "import", "--user", "alice", "--store", s.Store, filepath.Join(src, aliceSecrets[3]))
	mustWrite(t, A("share", "shared.txt"), []byte("shared"), 0o644)
	mustWrite(t, A("groups", "team-alpha", "team.txt"), []byte("team"), 0o644)
	secretAbs := A(aliceSecrets[0])

	for _, u := range []string{"bob", "carol"} {
		U := func(p ...string) string { return s.In(u, p...) }
		w := u + ": "
		mustWrite(t, U("mine.txt"), []byte(u), 0o644)
		mustMkdir(t, U("d1"), 0o755)
		mustMkdir(t, U("d1", "d2"), 0o755)

		// Absolute symlinks into alice's view, and to the mount root: in
		// share/, which other users' processes follow, EPERM. In the
		// user's own zones the default policy (shared-in-zone) allows any
		// target: only this user's processes follow them, in their own
		// mount namespace, so they reach nothing those processes could
		// not reach anyway (here, in the tests' one namespace, only root
		// passes the 0700 mount root).
		for _, target := range []string{secretAbs, A(), s.Root, "/", filepath.Join(U(), "..", "alice", aliceSecrets[0])} {
			wantErrno(t, w+"ln -s "+target+" (share)", os.Symlink(target, U("share", "x")), syscall.EPERM)
			if wantOK(t, w+"ln -s "+target+" (private)", os.Symlink(target, U("x"))) {
				wantOK(t, w+"rm x", os.Remove(U("x")))
			}
		}
		// The removed links went to the user's trash, where the listings
		// below would show the names the user typed into them.
		adminOK(t, "trash", "purge", "--holder", "user:"+u, "--all", "--store", s.Store)
		// Relative chains climbing out of share/ and groups/: EPERM.
		for _, c := range []struct{ target, link string }{
			{"../../alice/" + aliceSecrets[0], "share/x"},
			{"../../../alice/output", "share/x"},
			{"../alice/" + aliceSecrets[0], "share/x"},
		} {
			wantErrno(t, w+"ln -s "+c.target+" "+c.link, os.Symlink(c.target, U(c.link)), syscall.EPERM)
		}
		if u == "bob" {
			wantErrno(t, w+"ln -s ../../../alice groups/team-alpha/x",
				os.Symlink("../../../alice", U("groups", "team-alpha", "x")), syscall.EPERM)
		}
		if out, code := tool(t, "ln", "-s", secretAbs, U("share", "x")); code == 0 || !strings.Contains(out, "Operation not permitted") {
			t.Errorf(w+"ln -s %s share/x: exit %d %q, want Operation not permitted", secretAbs, code, out)
		}

		// Hard links and renames between share/, groups/ and the private
		// zone: EXDEV.
		wantErrno(t, w+"link share/shared.txt into private", os.Link(U("share", "shared.txt"), U("stolen.txt")), syscall.EXDEV)
		wantErrno(t, w+"link mine.txt into share", os.Link(U("mine.txt"), U("share", "mine.txt")), syscall.EXDEV)
		wantErrno(t, w+"rename share/shared.txt into private", os.Rename(U("share", "shared.txt"), U("stolen.txt")), syscall.EXDEV)
		wantErrno(t, w+"rename mine.txt into share", os.Rename(U("mine.txt"), U("share", "mine.txt")), syscall.EXDEV)
		wantErrno(t, w+"rename d1 into share", os.Rename(U("d1"), U("share", "d1")), syscall.EXDEV)
		wantErrno(t, w+"rename mine.txt into output", os.Rename(U("mine.txt"), U("output", "mine.txt")), syscall.EXDEV)
		if u == "bob" {
			wantErrno(t, w+"link groups/team-alpha/team.txt into private", os.Link(U("groups", "team-alpha", "team.txt"), U("t.txt")), syscall.EXDEV)
			wantErrno(t, w+"rename groups/team-alpha/team.txt into share", os.Rename(U("groups", "team-alpha", "team.txt"), U("share", "team.txt")), syscall.EXDEV)
		}
		// Between views: different mounts, EXDEV from the kernel.
		wantErrno(t, w+"rename into alice's view", os.Rename(U("mine.txt"), A("from-"+u)), syscall.EXDEV)
		wantErrno(t, w+"link alice's secret into this view", os.Link(secretAbs, U("stolen.txt")), syscall.EXDEV)
		wantErrno(t, w+"link share/ of alice's view into share/ of this one", os.Link(A("share", "shared.txt"), U("share", "s2.txt")), syscall.EXDEV)

		// Lookups of alice's names inside this view: ENOENT.
		for _, p := range []string{aliceSecrets[0], aliceSecrets[1], "output/" + aliceSecrets[2], "uploads/" + aliceSecrets[3],
			"share/../" + aliceSecrets[0], "output/../" + aliceSecrets[0], "d1/../" + aliceSecrets[1]} {
			_, err := os.Lstat(U(p))
			wantErrno(t, w+"lstat "+p, err, syscall.ENOENT)
		}
		// ".." chains: from inside the view they stay in it; from its
		// root they reach the host's mount root, not alice's view
		// through this one.
		for _, p := range []string{"share/..", "output/..", "uploads/..", "groups/..", "d1/d2/../.."} {
			fi, err := os.Stat(U(p))
			root, rerr := os.Stat(U())
			if err != nil || rerr != nil || !os.SameFile(fi, root) {
				t.Errorf(w+"%s is not the view root: %v %v", p, err, rerr)
			}
		}
		if u == "bob" {
			fi, err := os.Stat(U("groups", "team-alpha", "..", ".."))
			root, _ := os.Stat(U())
			if err != nil || !os.SameFile(fi, root) {
				t.Errorf(w+"groups/team-alpha/../.. is not the view root: %v", err)
			}
		}
		up, err := os.Stat(U(".."))
		hostRoot, _ := os.Stat(s.Root)
		if err != nil || !os.SameFile(up, hostRoot) {
			t.Errorf(w+"<view>/.. is not the host's mount root %s: %v", s.Root, err)
		}

		// xattr tricks: the computed attributes name only share entries'
		// owners; none can be forged.
		if got := getx(t, U("share", "shared.txt"), "user.shedfs.owner"); got != "alice" {
			t.Errorf(w+"owner of share/shared.txt: %q", got)
		}
		if got := getx(t, U(), "user.shedfs.zone"); got != "private" {
			t.Errorf(w+"zone of the view root: %q, want private", got)
		}
		wantErrno(t, w+"set user.shedfs.zone of mine.txt to private:alice", setx(U("mine.txt"), "user.shedfs.zone", "private:alice"), syscall.EPERM)
		wantErrno(t, w+"set user.shedfs.zone of share/ to private:alice", setx(U("share"), "user.shedfs.zone", "private:alice"), syscall.EPERM)
		wantErrno(t, w+"set user.shedfs.owner of mine.txt to alice", setx(U("mine.txt"), "user.shedfs.owner", "alice"), syscall.EPERM)
		wantErrno(t, w+"set user.shedfs.owner of share/shared.txt to "+u, setx(U("share", "shared.txt"), "user.shedfs.owner", u), syscall.EPERM)
		for _, name := range []string{"user.shedfs.path", "user.shedfs.ino", "user.shedfs.owner.alice", "trusted.shedfs.zone"} {
			if v, err := getxattr(U("mine.txt"), name); err == nil {
				leaks(t, w+"getxattr "+name, v)
			}
		}
		if out, code := tool(t, "getfattr", "-R", "-d", "-m", "-", "--absolute-names", U()); code != 0 {
			t.Errorf(w+"getfattr -R -d -m - on the view: exit %d %s", code, out)
		} else {
			leaks(t, w+"getfattr -R -d -m - of the view", out)
		}
		for _, name := range []string{"user.shedfs.owner", "user.shedfs.zone", "user.shedfs.mode"} {
			out, _ := tool(t, "getfattr", "-R", "--absolute-names", "-n", name, U())
			leaks(t, w+"getfattr -R -n "+name, out)
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(line, name+"="); ok && strings.Contains(v, "private:alice") {
					t.Errorf(w+"getfattr -R -n %s shows %s", name, line)
				}
			}
		}

		// A reserved name cannot be replaced or bound to something else.
		mustMkdir(t, U("fake"), 0o755)
		mustWrite(t, U("fake", "planted"), []byte("x"), 0o644)
		for _, name := range reservedNames {
			wantErrno(t, w+"rename fake "+name, unix.Rename(U("fake"), U(name)), syscall.EPERM)
			wantErrno(t, w+"renameat2 RENAME_EXCHANGE fake "+name,
				unix.Renameat2(unix.AT_FDCWD, U("fake"), unix.AT_FDCWD, U(name), unix.RENAME_EXCHANGE), syscall.EPERM)
			wantErrno(t, w+"ln -s "+secretAbs+" "+name, os.Symlink(secretAbs, U(name)), syscall.EEXIST)
			wantErrno(t, w+"ln -s fake "+name, os.Symlink("fake", U(name)), syscall.EEXIST)
		}
		if _, err := os.Lstat(U("share", "planted")); err == nil {
			t.Errorf("%sshare/ was replaced by a directory of the user's", w)
		}

		// The full listing of the view names nothing of alice's.
		out, code := tool(t, "find", U())
		if code != 0 {
			t.Errorf(w+"find the view: exit %d %s", code, out)
		}
		leaks(t, w+"find of the view", out)
		out, _ = tool(t, "ls", "-laR", U())
		leaks(t, w+"ls -laR of the view", out)
	}

	// carol never reaches team-alpha by any path.
	for _, p := range []string{"groups/team-alpha", "groups/team-alpha/team.txt", "groups/../groups/team-alpha"} {
		_, err := os.Lstat(s.In("carol", p))
		wantErrno(t, "carol: lstat "+p, err, syscall.ENOENT)
	}
	wantErrno(t, "carol: ln -s ../groups/team-alpha/team.txt share/x",
		os.Symlink("../groups/team-alpha/team.txt", s.In("carol", "share", "x")), syscall.EPERM)
	wantErrno(t, "carol: mkdir groups/team-alpha", os.Mkdir(s.In("carol", "groups", "team-alpha"), 0o755), syscall.EACCES)

	// A path through groups/ after bob's removal from team-alpha: his
	// directory handle and cwd opened before fail, the path is gone.
	dirFd, err := unix.Open(s.In("bob", "groups", "team-alpha"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatalf("bob opens groups/team-alpha: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			unix.Close(dirFd)
		}
	}()
	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", s.Store)
	for _, p := range []string{"groups/team-alpha", "groups/team-alpha/team.txt"} {
		_, err := os.Lstat(s.In("bob", p))
		wantErrno(t, "bob after removal: lstat "+p, err, syscall.ENOENT)
	}
	if got := listNames(t, s.In("bob", "groups")); len(got) != 0 {
		t.Errorf("bob's groups/ after removal lists %v", got)
	}
	fd, err := unix.Openat(dirFd, "team.txt", unix.O_RDONLY, 0)
	if err == nil {
		unix.Close(fd)
		t.Errorf("bob after removal: openat(groups/team-alpha fd opened before, team.txt) succeeded, want EACCES")
	} else {
		wantErrno(t, "bob after removal: openat(old groups/team-alpha fd, team.txt)", err, syscall.EACCES)
	}
	fd, err = unix.Openat(dirFd, "new.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err == nil {
		unix.Close(fd)
		t.Errorf("bob after removal: created new.txt through the old groups/team-alpha fd")
	} else if !errors.Is(err, syscall.EACCES) {
		t.Errorf("bob after removal: create through the old groups/team-alpha fd: %v, want EACCES", err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirFd, "team.txt", &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		t.Errorf("bob after removal: fstatat(old groups/team-alpha fd, team.txt) succeeded")
	}
	buf := make([]byte, 4096)
	if n, err := unix.Getdents(dirFd, buf); err == nil && n > 0 && strings.Contains(string(buf[:n]), "team.txt") {
		t.Errorf("bob after removal: getdents on the groups/team-alpha fd he opened before lists team.txt, want EACCES")
	} else if err != nil && !errors.Is(err, syscall.EACCES) {
		t.Errorf("bob after removal: getdents on the old groups/team-alpha fd: %v, want EACCES", err)
	}

	unix.Close(dirFd)
	closed = true

	// What the daemon says about bob's and carol's attempts (its log
	// lines) names nothing of alice's either.
	for _, line := range strings.Split(s.Stderr(), "\n") {
		if strings.Contains(line, "user=bob") || strings.Contains(line, "user=carol") {
			leaks(t, "a daemon log line", line)
		}
	}
	// The audit trail of bob and carol names nothing of alice's.
	for _, u := range []string{"bob", "carol"} {
		out := adminOK(t, "audit", "--store", s.Store, "--user", u, "--json")
		leaks(t, "the audit trail of "+u, out)
	}
	s.Stop()
	fsckClean(t, s.Store)
}

// TestEscapeMovedSymlink: a relative link made in-zone deep in share/ must
// not climb out once its directory is moved closer to the zone root:
// readlink and following it are refused (EPERM).
func TestEscapeMovedSymlink(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	B := func(p ...string) string { return s.In("bob", p...) }
	mustMkdir(t, B("share", "a"), 0o755)
	mustMkdir(t, B("share", "a", "b"), 0o755)
	mustWrite(t, B("share", "x.txt"), []byte("x"), 0o644)
	mustWrite(t, s.In("alice", aliceSecrets[0]), []byte("top secret"), 0o600)
	// share/a/b/l -> ../../x.txt is share/x.txt: in zone.
	wantOK(t, "bob: ln -s ../../x.txt share/a/b/l", os.Symlink("../../x.txt", B("share", "a", "b", "l")))
	if got, err := os.ReadFile(B("share", "a", "b", "l")); err != nil || string(got) != "x" {
		t.Errorf("reading through share/a/b/l: %q %v", got, err)
	}
	// Moved up one level, the same target names <view root>/x.txt: in
	// alice's view, alice's private zone.
	wantOK(t, "bob: mv share/a/b share/b", os.Rename(B("share", "a", "b"), B("share", "b")))
	mustWrite(t, s.In("alice", "x.txt"), []byte("alice private x"), 0o600)
	for _, u := range []string{"alice", "bob", "carol"} {
		l := s.In(u, "share", "b", "l")
		_, err := os.Readlink(l)
		wantErrno(t, u+": readlink share/b/l (now climbing out of share)", err, syscall.EPERM)
		data, err := os.ReadFile(l)
		if err == nil {
			t.Errorf("%s: reading through share/b/l after the move gave %q, want EPERM", u, data)
		} else {
			wantErrno(t, u+": open through share/b/l after the move", err, syscall.EPERM)
		}
	}
	s.Stop()
}
