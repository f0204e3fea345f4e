package integration

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A model-based test of undo (issue 24): random sequences of creates,
// writes, truncates, renames of files and directories, hard links,
// deletes, restores from trash/ and restore --at, through the kernel of
// a mounted view, against an in-memory model of the tree over time.
// After every step the view must equal the model (contents, modes,
// symlink targets, which names are one file); a restore --at T must give
// the model's tree at T; every dry run must list exactly what the real
// run does.
//
// The sequence is a function of the seed alone (the budget only decides
// how much of it runs): SHEDFS_UNDO_SEED replays a seed,
// SHEDFS_UNDO_STEPS fixes the number of steps, SHEDFS_UNDO_BUDGET (a
// duration) bounds the time (20s by default).
//
// What the trash by design cannot give back is kept out of the model: a
// write is an overwrite of a non-empty file (O_TRUNC keeps the old
// content; writing into an empty or open file keeps nothing), and no
// mode changes.

// mfile is one file of the model: content (a symlink's target) and mode.
type mfile struct {
	content string
	mode    os.FileMode // permission bits; 0 for a symlink
	symlink bool
}

// umodel is the tree below the work directory: its directories, and
// each file name's file (one id for every name of a hard-linked file).
type umodel struct {
	dirs  map[string]bool
	names map[string]int
	files map[int]mfile
}

func newUModel() *umodel {
	return &umodel{dirs: map[string]bool{}, names: map[string]int{}, files: map[int]mfile{}}
}

func (m *umodel) clone() *umodel {
	c := newUModel()
	for k, v := range m.dirs {
		c.dirs[k] = v
	}
	for k, v := range m.names {
		c.names[k] = v
	}
	for k, v := range m.files {
		c.files[k] = v
	}
	return c
}

// lines is the model as treeLines shows a view.
func (m *umodel) lines() []string {
	var out []string
	for d := range m.dirs {
		out = append(out, "d "+d)
	}
	groups := map[int][]string{}
	for p, id := range m.names {
		f := m.files[id]
		if f.symlink {
			out = append(out, "l "+p+" -> "+f.content)
		} else {
			out = append(out, fmt.Sprintf("f %s %o %s", p, f.mode, hashOf(f.content)))
		}
		groups[id] = append(groups[id], p)
	}
	for _, g := range groups {
		if len(g) > 1 {
			slices.Sort(g)
			out = append(out, "= "+strings.Join(g, " "))
		}
	}
	slices.Sort(out)
	return out
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", h[:6])
}

// treeLines shows the tree below root as umodel.lines does.
func treeLines(root string) ([]string, error) {
	var out []string
	groups := map[uint64][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out = append(out, "d "+rel)
			return nil
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, "l "+rel+" -> "+target)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("f %s %o %s", rel, fi.Mode().Perm(), hashOf(string(b))))
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		groups[ino] = append(groups[ino], rel)
		return nil
	})
	for _, g := range groups {
		if len(g) > 1 {
			slices.Sort(g)
			out = append(out, "= "+strings.Join(g, " "))
		}
	}
	slices.Sort(out)
	return out, err
}

// undoRun is one run of the model test.
type undoRun struct {
	t     *testing.T
	s     *serveDaemon
	rng   *rand.Rand
	seed  uint64
	root  string // the work directory in the view
	m     *umodel
	next  int       // the next file id
	times []string  // instants taken after each step
	snaps []*umodel // the model at each of them
	log   []string  // the steps so far
	trash string    // the work directory's trash/ in the view
}

var undoNames = []string{"a", "b", "c", "d", "e"}

func (u *undoRun) fail(format string, args ...any) {
	u.t.Helper()
	last := u.log
	if len(last) > 40 {
		last = last[len(last)-40:]
	}
	u.t.Fatalf("seed=%d (replay: SHEDFS_UNDO_SEED=%d) step %d: %s\nlast steps:\n  %s", u.seed, u.seed, len(u.log),
		fmt.Sprintf(format, args...), strings.Join(last, "\n  "))
}

func (u *undoRun) path(rel string) string { return filepath.Join(u.root, rel) }

// pick returns one of xs chosen by the seed's sequence ("" when empty).
func (u *undoRun) pick(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	slices.Sort(xs)
	return xs[u.rng.IntN(len(xs))]
}

func (u *undoRun) dirList(withRoot bool) []string {
	var out []string
	if withRoot {
		out = append(out, "")
	}
	for d := range u.m.dirs {
		out = append(out, d)
	}
	return out
}

func (u *undoRun) fileList(pred func(mfile) bool) []string {
	var out []string
	for p, id := range u.m.names {
		if pred == nil || pred(u.m.files[id]) {
			out = append(out, p)
		}
	}
	return out
}

// freeName is a name in a random directory with nothing there (or, with
// overFile, perhaps a file); "" when the chosen directory has none.
func (u *undoRun) freeName(overFile bool) string {
	dir := u.pick(u.dirList(true))
	if strings.Count(dir, "/") >= 2 {
		dir = ""
	}
	name := undoNames[u.rng.IntN(len(undoNames))]
	p := filepath.Join(dir, name)
	if u.m.dirs[p] {
		return ""
	}
	if _, ok := u.m.names[p]; ok && !overFile {
		return ""
	}
	return p
}

func (u *undoRun) content() string {
	n := 1 + u.rng.IntN(3)
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "%d-%x\n", len(u.log), u.rng.Uint32())
	}
	return b.String()
}

// removeName takes name p out of the model.
func (u *undoRun) removeName(p string) {
	id, ok := u.m.names[p]
	if !ok {
		return
	}
	delete(u.m.names, p)
	for _, other := range u.m.names {
		if other == id {
			return
		}
	}
	delete(u.m.files, id)
}

func (u *undoRun) do(what string, err error) {
	u.t.Helper()
	u.log = append(u.log, what)
	if err != nil {
		u.fail("%s: %v", what, err)
	}
}

// step does one random step, changing the view and the model alike.
func (u *undoRun) step() {
	switch k := u.rng.IntN(100); {
	case k < 14: // create a file or a symlink
		p := u.freeName(false)
		if p == "" {
			return
		}
		id := u.next
		u.next++
		if u.rng.IntN(6) == 0 {
			target := undoNames[u.rng.IntN(len(undoNames))]
			u.do("symlink "+target+" "+p, os.Symlink(target, u.path(p)))
			u.m.files[id] = mfile{content: target, symlink: true}
		} else {
			mode := []os.FileMode{0o644, 0o600, 0o640}[u.rng.IntN(3)]
			c := u.content()
			f, err := os.OpenFile(u.path(p), os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err == nil {
				_, err = f.WriteString(c)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			u.do(fmt.Sprintf("create %s %o", p, mode), err)
			u.m.files[id] = mfile{content: c, mode: mode}
		}
		u.m.names[p] = id
	case k < 20: // mkdir
		p := u.freeName(false)
		if p == "" || strings.Count(p, "/") >= 2 {
			return
		}
		if _, ok := u.m.names[p]; ok {
			return
		}
		u.do("mkdir "+p, os.Mkdir(u.path(p), 0o755))
		u.m.dirs[p] = true
	case k < 32: // overwrite a non-empty file
		p := u.pick(u.fileList(func(f mfile) bool { return !f.symlink && f.content != "" }))
		if p == "" {
			return
		}
		c := u.content()
		f, err := os.OpenFile(u.path(p), os.O_WRONLY|os.O_TRUNC, 0)
		if err == nil {
			_, err = f.WriteString(c)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		u.do("write "+p, err)
		id := u.m.names[p]
		f2 := u.m.files[id]
		f2.content = c
		u.m.files[id] = f2
	case k < 37: // truncate to zero
		p := u.pick(u.fileList(func(f mfile) bool { return !f.symlink && f.content != "" }))
		if p == "" {
			return
		}
		u.do("truncate "+p, os.Truncate(u.path(p), 0))
		id := u.m.names[p]
		f := u.m.files[id]
		f.content = ""
		u.m.files[id] = f
	case k < 47: // rename a file, perhaps over another
		src := u.pick(u.fileList(nil))
		dst := u.freeName(true)
		if src == "" || dst == "" || dst == src {
			return
		}
		u.do("mv "+src+" "+dst, os.Rename(u.path(src), u.path(dst)))
		if u.m.names[dst] == u.m.names[src] {
			if _, ok := u.m.names[dst]; ok {
				return // two names of one file: rename does nothing
			}
		}
		id := u.m.names[src]
		delete(u.m.names, src)
		u.removeName(dst)
		u.m.names[dst] = id
	case k < 52: // rename a directory
		src := u.pick(u.dirList(false))
		dst := u.freeName(false)
		if src == "" || dst == "" || dst == src || strings.HasPrefix(dst, src+"/") {
			return
		}
		if _, ok := u.m.names[dst]; ok {
			return
		}
		if strings.Count(dst, "/")+u.depth(src) > 3 {
			return
		}
		u.do("mv "+src+" "+dst, os.Rename(u.path(src), u.path(dst)))
		u.moveDir(src, dst)
	case k < 58: // hard link
		src := u.pick(u.fileList(func(f mfile) bool { return !f.symlink }))
		dst := u.freeName(false)
		if src == "" || dst == "" {
			return
		}
		u.do("ln "+src+" "+dst, os.Link(u.path(src), u.path(dst)))
		u.m.names[dst] = u.m.names[src]
	case k < 66: // delete a file
		p := u.pick(u.fileList(nil))
		if p == "" {
			return
		}
		u.do("rm "+p, os.Remove(u.path(p)))
		u.removeName(p)
	case k < 69: // delete a directory tree
		d := u.pick(u.dirList(false))
		if d == "" {
			return
		}
		u.do("rm -rf "+d, os.RemoveAll(u.path(d)))
		for p := range u.m.names {
			if strings.HasPrefix(p, d+"/") {
				u.removeName(p)
			}
		}
		for p := range u.m.dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				delete(u.m.dirs, p)
			}
		}
	case k < 76: // mv a kept file out of trash/ back to its place
		u.trashRestore()
	default: // restore --at
		i := u.rng.IntN(len(u.times))
		u.restoreAt(i)
	}
}

// depth is how many levels directory d holds below it.
func (u *undoRun) depth(d string) int {
	n := 0
	for p := range u.m.dirs {
		if strings.HasPrefix(p, d+"/") {
			n = max(n, strings.Count(p[len(d):], "/"))
		}
	}
	return n
}

// moveDir renames directory src to dst in the model.
func (u *undoRun) moveDir(src, dst string) {
	for p := range u.m.dirs {
		if p == src || strings.HasPrefix(p, src+"/") {
			delete(u.m.dirs, p)
			u.m.dirs[dst+p[len(src):]] = true
		}
	}
	moved := map[string]int{}
	for p, id := range u.m.names {
		if strings.HasPrefix(p, src+"/") {
			moved[dst+p[len(src):]] = id
			delete(u.m.names, p)
		}
	}
	for p, id := range moved {
		u.m.names[p] = id
	}
}

// trashRestore moves a kept file of the work directory out of trash/ to
// the name it had, when that is not a directory and its parent is.
func (u *undoRun) trashRestore() {
	var entries []string
	filepath.WalkDir(u.trash, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(u.trash, p)
			entries = append(entries, rel)
		}
		return nil
	})
	e := u.pick(entries)
	if e == "" {
		return
	}
	dir, name := filepath.Split(e)
	dir = strings.TrimSuffix(dir, "/")
	at := strings.LastIndex(name, "@")
	if at < 0 {
		u.fail("trash entry %s has no time", e)
	}
	dst := filepath.Join(dir, name[:at])
	if (dir != "" && !u.m.dirs[dir]) || u.m.dirs[dst] {
		return
	}
	src := filepath.Join(u.trash, e)
	fi, err := os.Lstat(src)
	if err != nil {
		u.fail("lstat %s: %v", src, err)
	}
	var f mfile
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			u.fail("readlink %s: %v", src, err)
		}
		f = mfile{content: target, symlink: true}
	} else {
		b, err := os.ReadFile(src)
		if err != nil {
			u.fail("read %s: %v", src, err)
		}
		f = mfile{content: string(b), mode: fi.Mode().Perm()}
	}
	u.do("mv trash/"+e+" "+dst, os.Rename(src, u.path(dst)))
	u.removeName(dst)
	id := u.next
	u.next++
	u.m.files[id] = f
	u.m.names[dst] = id
}

// restoreAt restores the work directory, or now and then one directory
// in it, to instant i: the dry run and the real run must agree. For the
// work directory the model becomes the model then. For a directory in
// it, the view below it must be the model's then, and outside it no file
// may have come or changed (files moved out of it since come back); the
// model then becomes what the view shows.
func (u *undoRun) restoreAt(i int) {
	at := u.times[i]
	sub := ""
	if u.rng.IntN(4) == 0 {
		dirs := u.dirList(false)
		for d := range u.snaps[i].dirs {
			if !u.m.dirs[d] && !u.fileAbove(d) {
				dirs = append(dirs, d)
			}
		}
		sub = u.pick(dirs)
	}
	work := filepath.Join(filepath.Base(u.root), sub)
	what := fmt.Sprintf("restore --at #%d (%s) %s", i, at, work)
	dry := restoreAt(u.t, u.s.Store, "alice", at, work, true)
	real := restoreAt(u.t, u.s.Store, "alice", at, work, false)
	u.do(what, nil)
	if d, r := actionLines(dry), actionLines(real); !slices.Equal(d, r) {
		u.fail("%s: the dry run announced\n  %s\nthe real run did\n  %s", what, strings.Join(d, "\n  "), strings.Join(r, "\n  "))
	}
	if sub == "" {
		u.m = u.snaps[i].clone()
		return
	}
	vm := u.viewModel()
	if got, want := vm.sub(sub).lines(), u.snaps[i].sub(sub).lines(); !slices.Equal(got, want) {
		u.fail("%s: below %s the view shows\n  %s\nthe model then\n  %s", what, sub, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for p, id := range vm.names {
		if below(p, sub) {
			continue
		}
		old, ok := u.m.names[p]
		if !ok || u.m.files[old] != vm.files[id] {
			u.fail("%s: %s outside %s came or changed", what, p, sub)
		}
	}
	u.m = vm
}

// fileAbove reports whether a directory above d is a file now: a
// restore of d alone would have to replace it, outside d, which a
// restore of a subtree refuses ("... is not a directory").
func (u *undoRun) fileAbove(d string) bool {
	for p := filepath.Dir(d); p != "." && p != "/" && p != ""; p = filepath.Dir(p) {
		if _, ok := u.m.names[p]; ok {
			return true
		}
	}
	return false
}

// sub is the part of the model at or below d.
func (m *umodel) sub(d string) *umodel {
	c := newUModel()
	for p := range m.dirs {
		if below(p, d) {
			c.dirs[p] = true
		}
	}
	for p, id := range m.names {
		if below(p, d) {
			c.names[p] = id
			c.files[id] = m.files[id]
		}
	}
	return c
}

// viewModel is a model of what the view shows now.
func (u *undoRun) viewModel() *umodel {
	m := newUModel()
	ids := map[uint64]int{}
	err := filepath.WalkDir(u.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(u.root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			m.dirs[rel] = true
			return nil
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		id, ok := ids[ino]
		if !ok {
			id = u.next
			u.next++
			ids[ino] = id
			if fi.Mode()&os.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				m.files[id] = mfile{content: target, symlink: true}
			} else {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				m.files[id] = mfile{content: string(b), mode: fi.Mode().Perm()}
			}
		}
		m.names[rel] = id
		return nil
	})
	if err != nil {
		u.fail("walk the view: %v", err)
	}
	return m
}

// check compares the view with the model.
func (u *undoRun) check() {
	u.t.Helper()
	got, err := treeLines(u.root)
	if err != nil {
		u.fail("walk the view: %v", err)
	}
	want := u.m.lines()
	if !slices.Equal(got, want) {
		var diff []string
		for _, l := range want {
			if !slices.Contains(got, l) {
				diff = append(diff, "- "+l+" (model)")
			}
		}
		for _, l := range got {
			if !slices.Contains(want, l) {
				diff = append(diff, "+ "+l+" (view)")
			}
		}
		u.fail("the view differs from the model:\n  %s", strings.Join(diff, "\n  "))
	}
}

func envInt(t *testing.T, name string) (uint64, bool) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n, true
}

// TestUndoModel is the model-based test of undo; see the top of the file.
func TestUndoModel(t *testing.T) {
	t.Parallel()
	seed, ok := envInt(t, "SHEDFS_UNDO_SEED")
	if !ok {
		seed = uint64(time.Now().UnixNano())
	}
	steps, fixed := envInt(t, "SHEDFS_UNDO_STEPS")
	if !fixed {
		steps = 2000
	}
	budget := 20 * time.Second
	if v := os.Getenv("SHEDFS_UNDO_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SHEDFS_UNDO_BUDGET=%q: %v", v, err)
		}
		budget = d
	}
	t.Logf("seed=%d (replay: SHEDFS_UNDO_SEED=%d)", seed, seed)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	u := &undoRun{t: t, s: s, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), seed: seed,
		root: s.In("alice", "u"), trash: s.In("alice", "trash", "u"), m: newUModel()}
	mustMkdir(t, u.root, 0o755)
	u.times = append(u.times, instant())
	u.snaps = append(u.snaps, u.m.clone())
	deadline := time.Now().Add(budget)
	n := 0
	for ; uint64(n) < steps && (fixed || time.Now().Before(deadline)); n++ {
		u.step()
		u.check()
		u.times = append(u.times, instant())
		u.snaps = append(u.snaps, u.m.clone())
	}
	restores := 0
	for _, l := range u.log {
		if strings.HasPrefix(l, "restore --at") {
			restores++
		}
	}
	t.Logf("seed=%d: %d steps, %d changes, %d restores --at", seed, n, len(u.log), restores)
	fsckOnline(t, s)
}

// below reports whether p is d or below it.
func below(p, d string) bool { return p == d || strings.HasPrefix(p, d+"/") }
