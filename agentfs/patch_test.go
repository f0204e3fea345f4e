package agentfs

import (
	"context"
	"testing"
	"time"

	"github.com/shedfs/shedfs/acl"
)

// TestApplyPatch: every hunk of every file, or nothing.
func TestApplyPatch(t *testing.T) {
	ctx := context.Background()
	start := map[string]string{
		"src/a.txt": "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n",
		"src/b.txt": "alpha\nbeta\n",
		"src/c.txt": "gone\n",
		"src/d.txt": "no end",
	}
	cases := []struct {
		name  string
		diff  string
		code  Code
		after map[string]string // "" is: must not exist
	}{
		{name: "two hunks, git prefixes", diff: `diff --git a/src/a.txt b/src/a.txt
--- a/src/a.txt
+++ b/src/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
@@ -6,3 +6,4 @@
 six
 seven
+seven and a half
 eight
`, after: map[string]string{"src/a.txt": "one\nTWO\nthree\nfour\nfive\nsix\nseven\nseven and a half\neight\n"}},
		{name: "offset hunk, new file, deletion", diff: `--- src/b.txt
+++ src/b.txt
@@ -5,2 +5,2 @@
 alpha
-beta
+BETA
--- /dev/null
+++ src/new/n.txt
@@ -0,0 +1,2 @@
+fresh
+file
--- src/c.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
`, after: map[string]string{"src/b.txt": "alpha\nBETA\n", "src/new/n.txt": "fresh\nfile\n", "src/c.txt": ""}},
		{name: "no newline at end", diff: `--- src/d.txt
+++ src/d.txt
@@ -1 +1,2 @@
-no end
\ No newline at end of file
+no end
+now one
`, after: map[string]string{"src/d.txt": "no end\nnow one\n"}},
		{name: "one hunk misses: nothing written", diff: `--- src/b.txt
+++ src/b.txt
@@ -1,2 +1,2 @@
 alpha
-beta
+changed
--- src/a.txt
+++ src/a.txt
@@ -1,1 +1,1 @@
-not there
+x
`, code: CodeConflict, after: start},
		{name: "a new file that exists", diff: "--- /dev/null\n+++ src/b.txt\n@@ -0,0 +1 @@\n+x\n", code: CodeExists, after: start},
		{name: "outside the view", diff: "--- ../x\n+++ ../x\n@@ -1 +1 @@\n-a\n+b\n", code: CodePathEscape, after: start},
		{name: "absolute", diff: "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", code: CodePathEscape, after: start},
		{name: "not a diff", diff: "hello", code: CodeInvalidArgument, after: start},
		{name: "bad counts", diff: "--- src/b.txt\n+++ src/b.txt\n@@ -1,5 +1,5 @@\n alpha\n", code: CodeInvalidArgument, after: start},
		{name: "into uploads", diff: "--- /dev/null\n+++ uploads/x\n@@ -0,0 +1 @@\n+x\n", code: CodePermissionDenied, after: start},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t)
			f := fx.fs(t, "alice", nil)
			put(t, f, start)
			_, err := f.ApplyPatch(ctx, c.diff, 1<<20)
			if c.code != "" {
				wantCode(t, c.name, err, c.code)
			} else if err != nil {
				t.Fatal(err)
			}
			for p, want := range c.after {
				b, _, err := f.ReadAll(ctx, p, 1<<20)
				if want == "" {
					wantCode(t, p, err, CodeNotFound)
					continue
				}
				if err != nil || string(b) != want {
					t.Errorf("%s: %q %v, want %q", p, b, err, want)
				}
			}
		})
	}
	// A failure while writing (a file another holder edit-locked) puts
	// back what the patch already wrote.
	fx0 := newFixture(t)
	alice := fx0.fs(t, "alice", nil)
	put(t, alice, map[string]string{"groups/team/plan.md": "v1\n"})
	if err := fx0.store.AddMember("team", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx0.fs(t, "bob", nil).LockOpen(ctx, "groups/team/plan.md", time.Minute, 100); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a locked file", func() error {
		_, err := alice.ApplyPatch(ctx, "--- /dev/null\n+++ groups/team/new.md\n@@ -0,0 +1 @@\n+x\n--- groups/team/plan.md\n+++ groups/team/plan.md\n@@ -1 +1 @@\n-v1\n+v2\n", 1<<20)
		return err
	}(), CodeFileLocked)
	wantCode(t, "the new file undone", func() error { _, err := alice.Stat("groups/team/new.md"); return err }(), CodeNotFound)

	// A token without write access is refused before anything is read.
	fx := newFixture(t)
	put(t, fx.fs(t, "alice", nil), start)
	ro := fx.fs(t, "alice", &acl.Grant{Access: acl.AccessRead | acl.AccessList})
	wantCode(t, "read-only token", func() error {
		_, err := ro.ApplyPatch(ctx, "--- src/b.txt\n+++ src/b.txt\n@@ -1 +1 @@\n-alpha\n+x\n", 1<<20)
		return err
	}(), CodePermissionDenied)
}
