package integration

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestCoherenceNegativeEntries: a view's kernel keeps "no such name" for
// long, and a new name in a shared directory is told only to the views
// whose kernel looked that name up (or removed it itself). Every kind of
// new name (create, mkdir, symlink, link, rename, a name made again after
// a removal) shows at once in the views that had it cached as absent.
func TestCoherenceNegativeEntries(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, dir := range []string{"share", "groups/team-alpha"} {
		in := func(user string) func(p ...string) string {
			return func(p ...string) string { return s.In(user, append([]string{dir}, p...)...) }
		}
		A, B := in("alice"), in("bob")
		others := map[string]func(p ...string) string{"bob": B}
		if dir == "share" {
			others["carol"] = in("carol")
		}
		absent := func(what string, p ...string) {
			t.Helper()
			for user, V := range others {
				_, err := os.Lstat(V(p...))
				wantErrno(t, dir+": "+user+" stats "+what+" before it exists", err, syscall.ENOENT)
			}
		}
		present := func(what string, p ...string) {
			t.Helper()
			for user, V := range others {
				atOnce(t, dir+": "+user+" finds "+what, func() bool {
					_, err := os.Lstat(V(p...))
					return err == nil
				})
			}
		}
		gone := func(what string, p ...string) {
			t.Helper()
			for user, V := range others {
				atOnce(t, dir+": "+user+" no longer finds "+what, func() bool {
					_, err := os.Lstat(V(p...))
					return errors.Is(err, syscall.ENOENT)
				})
			}
		}

		absent("n", "n")
		mustWrite(t, A("n"), []byte("n"), 0o644)
		present("the file alice created", "n")

		absent("d", "d")
		absent("d/x", "d", "x")
		mustMkdir(t, A("d"), 0o755)
		present("the folder alice made", "d")
		absent("d/x", "d", "x")
		mustWrite(t, A("d", "x"), []byte("x"), 0o644)
		present("the file alice created in it", "d", "x")

		absent("sl", "sl")
		wantOK(t, dir+": alice makes a symlink", os.Symlink("n", A("sl")))
		present("the symlink", "sl")

		absent("ln", "ln")
		wantOK(t, dir+": alice links ln to n", os.Link(A("n"), A("ln")))
		present("the link", "ln")

		absent("dst", "dst")
		mustWrite(t, A("src"), []byte("s"), 0o644)
		wantOK(t, dir+": alice renames src to dst", os.Rename(A("src"), A("dst")))
		present("the renamed file", "dst")
		gone("the old name", "src")

		// Removed and made again, by someone else: the remover's own
		// kernel holds the name as absent.
		wantOK(t, dir+": alice removes n", os.Remove(A("n")))
		gone("the removed file", "n")
		mustWrite(t, B("n"), []byte("again"), 0o644)
		atOnce(t, dir+": alice finds n, made again by bob", func() bool {
			got, err := os.ReadFile(A("n"))
			return err == nil && string(got) == "again"
		})
		wantOK(t, dir+": alice removes d/x", os.Remove(A("d", "x")))
		wantOK(t, dir+": alice removes d", os.Remove(A("d")))
		gone("the removed folder", "d")
		mustMkdir(t, B("d"), 0o755)
		atOnce(t, dir+": alice finds d, made again by bob", func() bool {
			st, err := os.Stat(A("d"))
			return err == nil && st.IsDir()
		})
		wantOK(t, dir+": bob renames dst back to src", os.Rename(B("dst"), B("src")))
		atOnce(t, dir+": alice finds src, renamed back by bob", func() bool {
			_, err := os.Stat(A("src"))
			return err == nil
		})
		atOnce(t, dir+": alice no longer finds dst", func() bool {
			_, err := os.Stat(A("dst"))
			return errors.Is(err, syscall.ENOENT)
		})
	}
	s.Stop()
	fsckClean(t, s.Store)
}
