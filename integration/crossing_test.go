package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/scan/clamdtest"
)

// The feature-crossing tests of issue 24 ("Where features meet"): each
// feature passed its own tests and broke where it met another. Each test
// here is a table of short scenarios across two or three features, each
// with the outcome the README promises.

// TestCrossingLinksScanRewrites: links × scanning × rewrites. A file in a
// scanned zone has a link; it is then rewritten one way or another. While
// a writer holds it open and after it closes, the link never serves bytes
// the scanner has not passed (no 200 with the signature, ever), a 200 has
// the served bytes' SHA-256 as its ETag, and the settled answer is the
// case's: 403 for an infected file, 200 with the new bytes for a clean
// one, 404 when the linked inode left the namespace.
func TestCrossingLinksScanRewrites(t *testing.T) {
	t.Parallel()
	cd := theClamd(t)
	store := newStore(t)
	setupTeam(t, store)
	s := startServeWith(t, store, []string{"--clamd", cd.Addr(), "--scan-wait", "300ms", "--http", "127.0.0.1:0"}, "alice", "bob")
	marker := []byte(clamdtest.BodyMarker)
	clean := []byte("a clean rewrite\n")

	cases := []struct {
		name string
		// rewrite changes x, which a link names; it returns the handle
		// it keeps open, or nil.
		rewrite func(t *testing.T, x string) *os.File
		// whileOpen are the answers allowed while the handle is open.
		whileOpen []int
		// after is the settled answer once nothing is open, and body
		// what a 200 then serves.
		after int
		body  []byte
	}{
		{"append the signature, kept open", func(t *testing.T, x string) *os.File {
			return openWriteKept(t, x, os.O_WRONLY|os.O_APPEND, marker, -1)
		}, []int{http.StatusServiceUnavailable, http.StatusForbidden}, http.StatusForbidden, nil},
		{"write the signature in the middle, kept open", func(t *testing.T, x string) *os.File {
			return openWriteKept(t, x, os.O_WRONLY, marker, 3)
		}, []int{http.StatusServiceUnavailable, http.StatusForbidden}, http.StatusForbidden, nil},
		{"O_TRUNC rewrite with the signature, closed", func(t *testing.T, x string) *os.File {
			mustWrite(t, x, marker, 0o644)
			return nil
		}, nil, http.StatusForbidden, nil},
		{"O_TRUNC rewrite with clean bytes, kept open", func(t *testing.T, x string) *os.File {
			return openWriteKept(t, x, os.O_WRONLY|os.O_TRUNC, clean, -1)
		}, []int{http.StatusServiceUnavailable, http.StatusOK}, http.StatusOK, clean},
		{"truncate to 0, then append clean bytes", func(t *testing.T, x string) *os.File {
			wantOK(t, "truncate", os.Truncate(x, 0))
			f := openWriteKept(t, x, os.O_WRONLY|os.O_APPEND, clean, -1)
			f.Close()
			return nil
		}, nil, http.StatusOK, clean},
		{"an infected file renamed over it", func(t *testing.T, x string) *os.File {
			mustWrite(t, x+".tmp", marker, 0o644)
			wantOK(t, "rename over", os.Rename(x+".tmp", x))
			return nil
		}, nil, http.StatusNotFound, nil},
		{"a clean file renamed over it (an editor's save)", func(t *testing.T, x string) *os.File {
			mustWrite(t, x+".tmp", clean, 0o644)
			wantOK(t, "rename over", os.Rename(x+".tmp", x))
			return nil
		}, nil, http.StatusNotFound, nil},
		{"renamed away, then the signature appended", func(t *testing.T, x string) *os.File {
			wantOK(t, "rename away", os.Rename(x, x+".moved"))
			return openWriteKept(t, x+".moved", os.O_WRONLY|os.O_APPEND, marker, -1)
		}, []int{http.StatusServiceUnavailable, http.StatusForbidden}, http.StatusForbidden, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := s.In("alice", "share", fmt.Sprintf("x%d.txt", i))
			mustWrite(t, x, []byte("clean start\n"), 0o644)
			waitXattr(t, x, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == "clean" })
			link := getLink(t, x)
			checkLinkAnswer(t, "before", link, []int{http.StatusOK}, marker)

			f := tc.rewrite(t, x)
			if f != nil {
				for range 3 {
					checkLinkAnswer(t, "while open", link, tc.whileOpen, marker)
				}
				wantOK(t, "close", f.Close())
			}
			var status int
			var body []byte
			if _, ok := within(10*time.Second, func() bool {
				status, body = checkLinkAnswer(t, "after", link, nil, marker)
				return status == tc.after
			}); !ok {
				t.Fatalf("the link answers %d once nothing is open, want %d", status, tc.after)
			}
			if tc.body != nil && !bytes.Equal(body, tc.body) {
				t.Errorf("the link serves %q, want %q", body, tc.body)
			}
		})
	}
}

// openWriteKept opens x with flags and writes data (at off when off >= 0),
// keeping the handle open.
func openWriteKept(t *testing.T, x string, flags int, data []byte, off int64) *os.File {
	t.Helper()
	f, err := os.OpenFile(x, flags, 0)
	if err != nil {
		t.Fatalf("open %s: %v", x, err)
	}
	if off >= 0 {
		_, err = f.WriteAt(data, off)
	} else {
		_, err = f.Write(data)
	}
	if err != nil {
		f.Close()
		t.Fatalf("write %s: %v", x, err)
	}
	return f
}

// checkLinkAnswer fetches link once: it must not serve marker with a 200,
// a 200 must carry the SHA-256 of what it serves as its ETag, and the
// status must be one of allowed (any when allowed is nil).
func checkLinkAnswer(t *testing.T, when, link string, allowed []int, marker []byte) (int, []byte) {
	t.Helper()
	resp, body := fetch(t, link)
	if resp.StatusCode == http.StatusOK {
		if bytes.Contains(body, marker) {
			t.Errorf("%s: the link serves the signature (200, %d bytes)", when, len(body))
		}
		if tag, want := resp.Header.Get("ETag"), `"`+sha256Hex(body)+`"`; tag != want {
			t.Errorf("%s: ETag %q for what is served, want %q", when, tag, want)
		}
	}
	if allowed != nil && !slices.Contains(allowed, resp.StatusCode) {
		t.Errorf("%s: the link answers %d, want one of %v (%s)", when, resp.StatusCode, allowed, strings.TrimSpace(truncate(body, 80)))
	}
	return resp.StatusCode, body
}

// TestCrossingSessionsTrashQuota: sessions × trash × quota. Each case is
// a user with a 1 MiB limit and a session of theirs (with or without a
// quota of its own), a few steps that fill a trash, and a last write
// whose outcome the README promises: the trash never causes EDQUOT,
// whichever holder's limit refused (the session's or its user's) and
// whichever trash holds the room (the session's or the user's, before or
// after a close), but a kept file still open is not evicted for it.
func TestCrossingSessionsTrashQuota(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	kib := func(n int) []byte { return bytes.Repeat([]byte("q"), n<<10) }
	type env struct {
		t          *testing.T
		s          *serveDaemon
		user, sess string
	}
	home := func(e env, p ...string) string { return e.s.In(e.user, p...) }
	scratch := func(e env, p ...string) string { return e.s.In(e.user+"@"+e.sess, p...) }
	keep := func(e env, p string, n int) { // write p, then rm it: n KiB kept
		mustWrite(e.t, p, kib(n), 0o644)
		wantOK(e.t, "rm "+p, os.Remove(p))
	}
	closeSession := func(e env, extra ...string) {
		adminOK(e.t, append([]string{"session", "close", "--store", store, "--user", e.user, e.sess}, extra...)...)
	}
	cases := []struct {
		name string
		// quota is the session's own --quota, "" for none.
		quota string
		// steps fill a trash; last is the write whose outcome counts.
		steps func(e env)
		last  func(e env) error
		// want is last's errno (0: it succeeds).
		want syscall.Errno
	}{
		{"the user's trash full, a write in a session without a quota evicts it", "",
			func(e env) { keep(e, home(e, "old"), 800) },
			func(e env) error { return os.WriteFile(scratch(e, "new"), kib(400), 0o644) }, 0},
		{"the session's own trash fills its quota, a write in it evicts it", "512KiB",
			func(e env) { keep(e, scratch(e, "old"), 400) },
			func(e env) error { return os.WriteFile(scratch(e, "new"), kib(300), 0o644) }, 0},
		{"the session's trash fills the user's limit, a write in the main view evicts it", "",
			func(e env) { keep(e, scratch(e, "old"), 800) },
			func(e env) error { return os.WriteFile(home(e, "new"), kib(400), 0o644) }, 0},
		{"the session's trash moved to the user's at close --keep, a write evicts it", "",
			func(e env) { keep(e, scratch(e, "old"), 800); closeSession(e, "--keep") },
			func(e env) error { return os.WriteFile(home(e, "new"), kib(400), 0o644) }, 0},
		{"a scratch tree closed to the trash, a write evicts it", "",
			func(e env) { mustWrite(e.t, scratch(e, "work"), kib(800), 0o644); closeSession(e) },
			func(e env) error { return os.WriteFile(home(e, "new"), kib(400), 0o644) }, 0},
		{"a kept file the session still reads is not evicted for the user's write", "",
			func(e env) {
				p := scratch(e, "held")
				mustWrite(e.t, p, kib(800), 0o644)
				f, err := os.Open(p)
				if err != nil {
					e.t.Fatal(err)
				}
				e.t.Cleanup(func() { f.Close() })
				wantOK(e.t, "rm held", os.Remove(p))
			},
			func(e env) error { return os.WriteFile(home(e, "new"), kib(400), 0o644) }, syscall.EDQUOT},
		{"the session's quota is reached by live files: EDQUOT, the user's trash is not its room", "512KiB",
			func(e env) {
				keep(e, home(e, "old"), 300)
				mustWrite(e.t, scratch(e, "live"), kib(400), 0o644)
			},
			func(e env) error { return os.WriteFile(scratch(e, "new"), kib(200), 0o644) }, syscall.EDQUOT},
	}
	var users []string
	for i := range cases {
		u := fmt.Sprintf("dave%d", i)
		users = append(users, u)
		adminOK(t, "user", "add", u, "--store", store)
		adminOK(t, "quota", "set", "user:"+u, "--bytes", "1MiB", "--store", store)
	}
	s := startServe(t, store, users...)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := env{t: t, s: s, user: users[i], sess: "s"}
			var extra []string
			if tc.quota != "" {
				extra = []string{"--quota", tc.quota}
			}
			s.sessionOpen(t, e.user, e.sess, extra...)
			tc.steps(e)
			err := tc.last(e)
			if tc.want == 0 {
				wantOK(t, "the last write", err)
			} else {
				wantErrno(t, "the last write", err, tc.want)
			}
		})
	}
}

// TestTrashRoomRightAfterRm: the trash never causes EDQUOT, even for a
// file removed a moment ago. The kernel sends a file's RELEASE after its
// close(2) returned, so right after `write f; rm f` the kept f may still
// be open in the daemon, and an open kept file is not evicted: the next
// write, which needs f's room, must wait for that release rather than
// fail. Each write here fills most of the limit, so each needs the file
// written and removed just before it evicted; four users at once keep
// the daemon busy enough that releases come late.
func TestTrashRoomRightAfterRm(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	users := []string{"erin", "fred", "gina", "hugo"}
	for _, u := range users {
		adminOK(t, "user", "add", u, "--store", store)
		adminOK(t, "quota", "set", "user:"+u, "--bytes", "1MiB", "--store", store)
	}
	s := startServe(t, store, users...)
	data := bytes.Repeat([]byte("r"), 900<<10)
	const rounds = 60
	var refused atomic.Int64
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			for i := range rounds {
				p := s.In(u, fmt.Sprintf("f%d", i))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					refused.Add(1)
					t.Errorf("%s, round %d: write: %v, want success (the file removed just before is in the trash)", u, i, err)
				}
				if err := os.Remove(p); err != nil {
					t.Errorf("%s, round %d: rm: %v", u, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Errorf("%d of %d writes refused for a trash the daemon could have evicted", n, rounds*len(users))
	}
}
