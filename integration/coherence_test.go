package integration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Coherence between views of one daemon, with the kernel's entry and
// attribute caches on (the views' default one-second timeouts): a change
// through alice's view is seen through bob's at once. Every check follows
// the change with no sleep; when one fails, lateBy measures how long the
// view took to catch up, for the report.

// lateBy polls cond for up to 3 s and returns how long it took to hold, or
// -1 if it never did.
func lateBy(cond func() bool) time.Duration {
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}

// atOnce fails the test unless cond holds right now, and reports how late
// it came true when it does not.
func atOnce(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	if d := lateBy(cond); d >= 0 {
		t.Errorf("%s: not at once; true %v later", what, d)
	} else {
		t.Errorf("%s: not at once, nor within 3s", what)
	}
}

// readAt0 reads a whole (small) file through an open descriptor from
// offset 0.
func readAt0(f *os.File) ([]byte, error) {
	buf := make([]byte, 1<<16)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// TestCoherenceGroupFile: writes, truncates, creates, removals, renames
// and mode changes through alice's view of team-alpha show in bob's view
// at once, whether bob had the file open first or opens it after.
func TestCoherenceGroupFile(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, dir := range []string{"groups/team-alpha", "share"} {
		A := func(p ...string) string { return s.In("alice", append([]string{dir}, p...)...) }
		B := func(p ...string) string { return s.In("bob", append([]string{dir}, p...)...) }
		w := dir + ": "

		// Reader first: bob has the file open and read it (page cache
		// filled), then alice writes.
		mustWrite(t, A("plan.md"), []byte("version one\n"), 0o644)
		f, err := os.Open(B("plan.md"))
		if err != nil {
			t.Fatalf("bob opens %s/plan.md: %v", dir, err)
		}
		if got, err := readAt0(f); err != nil || string(got) != "version one\n" {
			t.Errorf(w+"bob reads %q %v", got, err)
		}
		wantOK(t, "alice overwrites plan.md (same size)", writeFile(A("plan.md"), []byte("VERSION ONE\n")))
		atOnce(t, w+"bob's open handle reads alice's same-size overwrite", func() bool {
			got, err := readAt0(f)
			return err == nil && string(got) == "VERSION ONE\n"
		})
		mustWrite(t, A("plan.md"), []byte("version two, longer\n"), 0o644)
		atOnce(t, w+"bob's open handle reads alice's longer rewrite", func() bool {
			got, err := readAt0(f)
			return err == nil && string(got) == "version two, longer\n"
		})
		af, err := os.OpenFile(A("plan.md"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := af.Write([]byte("appended\n")); err != nil {
			t.Errorf("alice appends: %v", err)
		}
		atOnce(t, w+"bob's open handle reads alice's append while her handle is open", func() bool {
			got, err := readAt0(f)
			return err == nil && string(got) == "version two, longer\nappended\n"
		})
		af.Close()
		f.Close()
		// Bob opens after the write: the cached attributes must not cut it.
		if got, err := os.ReadFile(B("plan.md")); err != nil || string(got) != "version two, longer\nappended\n" {
			t.Errorf(w+"bob reads %q %v", got, err)
		}
		mustWrite(t, A("plan.md"), []byte("v3 a lot longer than before, to pass the cached size\n"), 0o644)
		atOnce(t, w+"bob opens after alice's rewrite and reads it", func() bool {
			got, err := os.ReadFile(B("plan.md"))
			return err == nil && string(got) == "v3 a lot longer than before, to pass the cached size\n"
		})

		// Truncate: bob's stat shows the new size at once.
		var st unix.Stat_t
		if err := unix.Stat(B("plan.md"), &st); err != nil {
			t.Fatal(err)
		}
		wantOK(t, "alice truncates plan.md to 3", os.Truncate(A("plan.md"), 3))
		atOnce(t, w+"bob's stat shows alice's truncate", func() bool {
			return unix.Stat(B("plan.md"), &st) == nil && st.Size == 3
		})
		atOnce(t, w+"bob reads the truncated file", func() bool {
			got, err := os.ReadFile(B("plan.md"))
			return err == nil && string(got) == "v3 "
		})
		// chmod: bob's stat shows the new mode bits at once.
		wantOK(t, "alice chmods plan.md", os.Chmod(A("plan.md"), 0o600))
		atOnce(t, w+"bob's stat shows alice's chmod", func() bool {
			return unix.Stat(B("plan.md"), &st) == nil && st.Mode&0o777 == 0o600
		})

		// New file: bob looked the name up before (negative entry), and
		// listed the directory; both show the file at once.
		_, err = os.Stat(B("new.txt"))
		wantErrno(t, w+"bob stats new.txt before it exists", err, syscall.ENOENT)
		_ = listNames(t, B())
		mustWrite(t, A("new.txt"), []byte("fresh"), 0o644)
		atOnce(t, w+"bob's stat finds alice's new file", func() bool {
			_, err := os.Stat(B("new.txt"))
			return err == nil
		})
		atOnce(t, w+"bob's ls shows alice's new file", func() bool {
			return slices.Contains(listNames(t, B()), "new.txt")
		})
		if got, err := os.ReadFile(B("new.txt")); err != nil || string(got) != "fresh" {
			t.Errorf(w+"bob reads new.txt: %q %v", got, err)
		}
		// Rename by alice: old name gone, new name there, at once.
		wantOK(t, "alice renames new.txt", os.Rename(A("new.txt"), A("renamed.txt")))
		atOnce(t, w+"bob no longer finds new.txt after alice's rename", func() bool {
			_, err := os.Stat(B("new.txt"))
			return errors.Is(err, syscall.ENOENT)
		})
		atOnce(t, w+"bob finds renamed.txt", func() bool {
			got, err := os.ReadFile(B("renamed.txt"))
			return err == nil && string(got) == "fresh"
		})
		atOnce(t, w+"bob's ls shows the rename", func() bool {
			names := listNames(t, B())
			return slices.Contains(names, "renamed.txt") && !slices.Contains(names, "new.txt")
		})
		// Rename over an existing file bob has looked up.
		mustWrite(t, A("target.txt"), []byte("old target"), 0o644)
		if got, err := os.ReadFile(B("target.txt")); err != nil || string(got) != "old target" {
			t.Errorf(w+"bob reads target.txt: %q %v", got, err)
		}
		wantOK(t, "alice renames renamed.txt over target.txt", os.Rename(A("renamed.txt"), A("target.txt")))
		atOnce(t, w+"bob reads the file renamed over target.txt", func() bool {
			got, err := os.ReadFile(B("target.txt"))
			return err == nil && string(got) == "fresh"
		})
		// Removal: gone from bob's stat and ls at once.
		wantOK(t, "alice removes target.txt", os.Remove(A("target.txt")))
		atOnce(t, w+"bob's stat no longer finds target.txt", func() bool {
			_, err := os.Stat(B("target.txt"))
			return errors.Is(err, syscall.ENOENT)
		})
		atOnce(t, w+"bob's ls no longer shows target.txt", func() bool {
			return !slices.Contains(listNames(t, B()), "target.txt")
		})
		// Directories too.
		_ = listNames(t, B())
		mustMkdir(t, A("sub"), 0o755)
		mustWrite(t, A("sub", "f"), []byte("f"), 0o644)
		atOnce(t, w+"bob reads a file in alice's new directory", func() bool {
			got, err := os.ReadFile(B("sub", "f"))
			return err == nil && string(got) == "f"
		})
		runTool(t, "", nil, "rm", "-rf", A("sub"))
		atOnce(t, w+"bob no longer finds alice's removed directory", func() bool {
			_, err := os.Stat(B("sub"))
			return errors.Is(err, syscall.ENOENT)
		})

		// Mode change: bob's getfattr and his writes follow at once, and
		// so does his handle opened for writing before the change.
		mustWrite(t, A("doc.txt"), []byte("doc"), 0o644)
		if got := getx(t, B("doc.txt"), "user.shedfs.mode"); got != "group" {
			t.Errorf(w+"bob sees mode %q, want group", got)
		}
		wf, err := os.OpenFile(B("doc.txt"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatalf("bob opens doc.txt for writing: %v", err)
		}
		if _, err := wf.WriteAt([]byte("DOC"), 0); err != nil {
			t.Errorf(w+"bob writes doc.txt in mode group: %v", err)
		}
		wantOK(t, "alice sets doc.txt to mode owner", setx(A("doc.txt"), "user.shedfs.mode", "owner"))
		atOnce(t, w+"bob's getfattr shows mode owner", func() bool {
			v, err := getxattr(B("doc.txt"), "user.shedfs.mode")
			return err == nil && v == "owner"
		})
		err = openWrite(B("doc.txt"), 0)
		wantErrno(t, w+"bob opens doc.txt for writing right after alice's mode change", err, syscall.EACCES)
		_, err = wf.WriteAt([]byte("late"), 0)
		wantErrno(t, w+"bob's handle opened before alice's mode change, next write", err, syscall.EACCES)
		wf.Close()
		if got := string(mustRead(t, A("doc.txt"))); got != "DOC" {
			t.Errorf(w+"doc.txt after the refused writes: %q", got)
		}
		wantOK(t, "alice sets doc.txt back to group", setx(A("doc.txt"), "user.shedfs.mode", "group"))
		atOnce(t, w+"bob writes again right after alice sets the mode back", func() bool {
			return writeFile(B("doc.txt"), []byte("bob")) == nil
		})
		// Ownership transfer: bob's getfattr shows it at once.
		wantOK(t, "alice gives doc.txt to bob", setx(A("doc.txt"), "user.shedfs.owner", "bob"))
		atOnce(t, w+"bob's getfattr shows him as owner", func() bool {
			v, err := getxattr(B("doc.txt"), "user.shedfs.owner")
			return err == nil && v == "bob"
		})
	}
	s.Stop()
	fsckClean(t, s.Store)
}

// TestCoherenceCarolAndRemoval: carol's view never shows team-alpha, even
// while alice and bob work in it; removing bob from the group takes
// groups/team-alpha out of his view at once, and his open handles fail on
// the next write with EACCES (never EIO), each refusal audited. Adding him
// back shows it again at once.
func TestCoherenceCarolAndRemoval(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	carolNever := func(when string) {
		t.Helper()
		if got := listNames(t, s.In("carol", "groups")); len(got) != 0 {
			t.Errorf("carol's groups/ lists %v %s", got, when)
		}
		for _, p := range []string{"groups/team-alpha", "groups/team-alpha/team.txt"} {
			_, err := os.Stat(s.In("carol", p))
			wantErrno(t, "carol: stat "+p+" "+when, err, syscall.ENOENT)
		}
	}
	carolNever("at start")
	if got := listNames(t, s.In("bob", "groups")); !slices.Equal(got, []string{"team-alpha"}) {
		t.Fatalf("bob's groups/ lists %v, want [team-alpha]", got)
	}
	team := s.In("alice", "groups", "team-alpha", "team.txt")
	mustWrite(t, team, []byte("team\n"), 0o644)
	carolNever("after alice's write in team-alpha")

	bobFile := s.In("bob", "groups", "team-alpha", "team.txt")
	wf, err := os.OpenFile(bobFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("bob opens team.txt for writing: %v", err)
	}
	defer wf.Close()
	rw, err := os.OpenFile(bobFile, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("bob opens team.txt read-write: %v", err)
	}
	defer rw.Close()
	if _, err := wf.Write([]byte("bob 1\n")); err != nil {
		t.Fatalf("bob writes while a member: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(s.In("bob", "groups", "team-alpha"), &st); err != nil {
		t.Fatalf("bob stats groups/team-alpha: %v", err)
	}

	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", s.Store)
	atOnce(t, "bob's groups/ is empty right after remove-member", func() bool {
		return len(listNames(t, s.In("bob", "groups"))) == 0
	})
	atOnce(t, "bob's stat of groups/team-alpha is ENOENT right after remove-member", func() bool {
		_, err := os.Stat(s.In("bob", "groups", "team-alpha"))
		return errors.Is(err, syscall.ENOENT)
	})
	_, err = os.Stat(bobFile)
	if err == nil {
		t.Errorf("bob still stats groups/team-alpha/team.txt right after remove-member")
	} else if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EACCES) {
		t.Errorf("bob stats groups/team-alpha/team.txt after removal: %v, want ENOENT or EACCES", err)
	}
	_, err = wf.Write([]byte("bob 2\n"))
	wantErrno(t, "bob's O_APPEND handle, next write after remove-member", err, syscall.EACCES)
	_, err = rw.WriteAt([]byte("X"), 0)
	wantErrno(t, "bob's O_RDWR handle, next write after remove-member", err, syscall.EACCES)
	err = rw.Truncate(0)
	wantErrno(t, "bob's O_RDWR handle, ftruncate after remove-member", err, syscall.EACCES)
	if got := mustRead(t, team); !bytes.Equal(got, []byte("team\nbob 1\n")) {
		t.Errorf("team.txt after bob's refused writes: %q", got)
	}
	checkAudit(t, s.Store, []auditWant{
		{"bob", "group:team-alpha", "write", "/groups/team-alpha/team.txt", "EACCES", "not_member"},
		{"bob", "group:team-alpha", "truncate", "/groups/team-alpha/team.txt", "EACCES", "not_member"},
	})
	carolNever("after bob's removal")

	adminOK(t, "group", "add-member", "team-alpha", "bob", "--store", s.Store)
	atOnce(t, "bob's groups/ lists team-alpha right after add-member", func() bool {
		return slices.Equal(listNames(t, s.In("bob", "groups")), []string{"team-alpha"})
	})
	atOnce(t, "bob reads team.txt right after add-member", func() bool {
		got, err := os.ReadFile(bobFile)
		return err == nil && string(got) == "team\nbob 1\n"
	})
	carolNever("after bob is added back")
	wf.Close()
	rw.Close()
	s.Stop()
	fsckClean(t, s.Store)
}

// TestCoherenceKernelCaches: what a view's kernel keeps for long (file
// pages across opens, directory listings, names found missing) follows
// every change it did not see itself: alice's same-size rewrite of a file
// bob read and closed, a rename and a hard link between two directories
// bob listed, and the admin's imports into alice's uploads/ (a new name she
// looked for, and --replace of a file she read).
func TestCoherenceKernelCaches(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"share"}, p...)...) }
	B := func(p ...string) string { return s.In("bob", append([]string{"share"}, p...)...) }

	// Pages kept across opens: bob reads the file twice (the second
	// open may keep the kernel's pages), alice rewrites it in place with
	// the same size, and bob's next open reads the new bytes.
	mustWrite(t, A("page.txt"), []byte("aaaa"), 0o644)
	for range 2 {
		if got := string(mustRead(t, B("page.txt"))); got != "aaaa" {
			t.Fatalf("bob reads page.txt: %q", got)
		}
	}
	// The same size and, set back by alice, the same times: nothing in
	// the attributes tells bob's kernel that its pages went stale.
	before, err := os.Stat(A("page.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, "alice rewrites page.txt in place", writeFile(A("page.txt"), []byte("bbbb")))
	wantOK(t, "alice sets the old mtime back", os.Chtimes(A("page.txt"), before.ModTime(), before.ModTime()))
	atOnce(t, "bob's next open reads alice's same-size rewrite", func() bool {
		got, err := os.ReadFile(B("page.txt"))
		return err == nil && string(got) == "bbbb"
	})
	// Bob's own rewrite keeps his cache right, and alice sees it.
	wantOK(t, "bob rewrites page.txt in place", writeFile(B("page.txt"), []byte("cccc")))
	if got := string(mustRead(t, B("page.txt"))); got != "cccc" {
		t.Errorf("bob rereads his own rewrite: %q", got)
	}
	atOnce(t, "alice reads bob's rewrite", func() bool {
		got, err := os.ReadFile(A("page.txt"))
		return err == nil && string(got) == "cccc"
	})

	// Listings and missing names of two directories, both parents of a
	// rename.
	mustMkdir(t, A("d1"), 0o755)
	mustMkdir(t, A("d2"), 0o755)
	mustWrite(t, A("d1", "f"), []byte("f"), 0o644)
	if got := listNames(t, B("d1")); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("bob lists d1: %v", got)
	}
	if got := listNames(t, B("d2")); len(got) != 0 {
		t.Fatalf("bob lists d2: %v", got)
	}
	for _, name := range []string{"f", "g"} {
		_, err := os.Stat(B("d2", name))
		wantErrno(t, "bob stats d2/"+name+" before it exists", err, syscall.ENOENT)
	}
	wantOK(t, "alice moves d1/f to d2/f", os.Rename(A("d1", "f"), A("d2", "f")))
	atOnce(t, "bob's ls of d1 no longer shows f", func() bool { return len(listNames(t, B("d1"))) == 0 })
	atOnce(t, "bob's ls of d2 shows f", func() bool { return slices.Equal(listNames(t, B("d2")), []string{"f"}) })
	atOnce(t, "bob's stat of d1/f is ENOENT", func() bool {
		_, err := os.Stat(B("d1", "f"))
		return errors.Is(err, syscall.ENOENT)
	})
	atOnce(t, "bob's stat finds d2/f", func() bool {
		_, err := os.Stat(B("d2", "f"))
		return err == nil
	})
	wantOK(t, "alice links d2/g to d2/f", os.Link(A("d2", "f"), A("d2", "g")))
	atOnce(t, "bob's stat finds the link d2/g", func() bool {
		_, err := os.Stat(B("d2", "g"))
		return err == nil
	})
	atOnce(t, "bob's stat of d2/f shows two links", func() bool {
		var st unix.Stat_t
		return unix.Stat(B("d2", "f"), &st) == nil && st.Nlink == 2
	})

	// The admin's imports into alice's uploads/.
	U := func(p ...string) string { return s.In("alice", append([]string{"uploads"}, p...)...) }
	src := t.TempDir()
	srcFile := src + "/x.txt"
	mustWrite(t, srcFile, []byte("one1"), 0o644)
	_, err = os.Stat(U("x.txt"))
	wantErrno(t, "alice stats uploads/x.txt before the import", err, syscall.ENOENT)
	_ = listNames(t, U())
	adminOK(t, "import", "--user", "alice", "--store", s.Store, srcFile)
	atOnce(t, "alice's stat finds the imported file", func() bool {
		_, err := os.Stat(U("x.txt"))
		return err == nil
	})
	atOnce(t, "alice's ls of uploads/ shows the imported file", func() bool {
		return slices.Contains(listNames(t, U()), "x.txt")
	})
	for range 2 {
		if got := string(mustRead(t, U("x.txt"))); got != "one1" {
			t.Fatalf("alice reads uploads/x.txt: %q", got)
		}
	}
	mustWrite(t, srcFile, []byte("two2"), 0o644)
	adminOK(t, "import", "--user", "alice", "--store", s.Store, "--replace", srcFile)
	atOnce(t, "alice's next open reads the replacing import", func() bool {
		got, err := os.ReadFile(U("x.txt"))
		return err == nil && string(got) == "two2"
	})
	s.Stop()
	fsckClean(t, s.Store)
}
