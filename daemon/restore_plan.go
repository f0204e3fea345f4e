package daemon

import (
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// The plan of a restore: the steps that turn the subtree now into the
// tree as it was (restore_history.go), worked out on a picture of the
// entries now that each planned step changes as the real step will, so
// that every step finds what the one before left. In order:
//
//  1. files of the subtree that are nowhere in the old tree go to the
//     trash;
//  2. the old tree's directories, parents first: one that is there
//     stays, one that moved since is renamed back (with all it holds),
//     any other is made;
//  3. its files: a file still elsewhere is renamed back from a name it
//     does not keep (a hard link gets a new link), a kept file is
//     restored; a file standing where another must go waits until it
//     moved to its own place, and when files wait on each other one of
//     them goes through the trash;
//  4. what is left that the old tree does not have goes: files to the
//     trash, directories (empty by then) removed, deepest first.

// sent is an entry in the picture of now.
type sent struct {
	ino  uint64 // 0: a directory the plan makes
	mode uint32
}

func (e sent) dir() bool { return e.mode&syscall.S_IFMT == syscall.S_IFDIR }

// planner is a restore's plan in the making.
type planner struct {
	r *restorer
	// The picture of the entries now, by zone path: the subtree and the
	// places the history says things went, and the directories above.
	at    map[string]sent
	kids  map[string]int             // entries of each directory
	paths map[uint64]map[string]bool // names of each file
	dirAt map[uint64]string          // path of each directory
	nlink map[uint64]uint32          // links of each file, all of them
	mode  map[uint64]uint32
	// kept are the files in the trash, as planned; entries, the trash
	// records when planning began (to name them).
	kept    map[uint64]bool
	entries map[uint64]metadata.TrashEntry
	keeps   bool // the trash is on: what the plan removes is kept
	// The old tree below the subtree: each file's path and the inode
	// holding the content it had (a version, when a truncate kept it);
	// each directory's path and inode (0 when it is gone).
	tgtFile map[string]uint64
	tgtDir  map[string]uint64
	// tpaths are the old tree's names of each content inode, in the
	// subtree or not: a name outside the subtree that the file had then
	// is not a name to rename it back from.
	tpaths map[uint64]map[string]bool
	// need counts the old tree's names of each content inode that do
	// not name it yet.
	need  map[uint64]int
	inos  map[uint64]*shedfs.Inode
	steps []RestoreAction
}

// plan works out the steps of the restore.
func (r *restorer) plan() ([]RestoreAction, error) {
	l := r.l
	trash, err := l.st.Meta.ListTrash([]shedfs.Holder{shedfs.HolderOf(r.zone)})
	if err != nil {
		return nil, asError(err, "list the trash")
	}
	pl := &planner{r: r, at: map[string]sent{}, kids: map[string]int{}, paths: map[uint64]map[string]bool{},
		dirAt: map[uint64]string{}, nlink: map[uint64]uint32{}, mode: map[uint64]uint32{},
		kept: map[uint64]bool{}, entries: map[uint64]metadata.TrashEntry{}, keeps: !r.off,
		tgtFile: map[string]uint64{}, tgtDir: map[string]uint64{}, tpaths: map[uint64]map[string]bool{},
		need: map[uint64]int{}, inos: map[uint64]*shedfs.Inode{}}
	for _, e := range trash {
		if e.Zone == r.zone {
			pl.kept[e.Ino] = true
			pl.entries[e.Ino] = e
			pl.mode[e.Ino] = e.Mode
		}
	}
	t, err := r.then(pl, trash)
	if err != nil {
		return nil, err
	}
	pl.target(t, t.root, "")
	if err := pl.steps1to4(); err != nil {
		return nil, err
	}
	return pl.steps, nil
}

// add puts entry n at zone path p into the picture (once).
func (pl *planner) add(p string, n *shedfs.Inode) {
	if p == "" {
		return
	}
	if _, ok := pl.at[p]; ok {
		return
	}
	pl.at[p] = sent{ino: n.Ino, mode: n.Mode}
	pl.kids[parentOf(p)]++
	pl.inos[n.Ino] = n
	if n.IsDir() {
		if _, ok := pl.kids[p]; !ok {
			pl.kids[p] = 0
		}
		pl.dirAt[n.Ino] = p
		return
	}
	pl.link1(n.Ino, p)
	pl.nlink[n.Ino] = n.Nlink
	pl.mode[n.Ino] = n.Mode
}

func (pl *planner) link1(ino uint64, p string) {
	if pl.paths[ino] == nil {
		pl.paths[ino] = map[string]bool{}
	}
	pl.paths[ino][p] = true
}

func parentOf(p string) string { return clean(path.Dir(p)) }

// inode returns ino's record, nil when it is gone.
func (pl *planner) inode(ino uint64) *shedfs.Inode {
	if n, ok := pl.inos[ino]; ok {
		return n
	}
	n, err := pl.r.l.st.Meta.GetInode(ino)
	if err != nil {
		n = nil
	}
	pl.inos[ino] = n
	if n != nil {
		if _, ok := pl.nlink[ino]; !ok {
			pl.nlink[ino] = n.Nlink
		}
		pl.mode[ino] = n.Mode
	}
	return n
}

// available reports whether ino can be put back: it has a name, or the
// trash keeps it.
func (pl *planner) available(ino uint64) bool {
	if pl.kept[ino] {
		return true
	}
	n := pl.inode(ino)
	return n != nil && n.Nlink > 0
}

// content is the inode that held the content file ino had at the time:
// the oldest version kept since, followed through versions of versions;
// 0 when neither it nor the file is left.
func (pl *planner) content(t *htree, ino uint64) uint64 {
	c := ino
	for range 64 {
		v, ok := t.content[c]
		if !ok {
			break
		}
		c = v
	}
	switch {
	case pl.available(c):
		return c
	case pl.available(ino):
		return ino // the versions are gone: the file as it is
	}
	return 0
}

// target reads the old tree below n (at zone path p).
func (pl *planner) target(t *htree, n *hnode, p string) {
	for name, k := range n.kids {
		kp := path.Join(p, name)
		in := within(kp, pl.r.rel)
		if k.dir {
			if in {
				ino := k.ino
				if d := pl.inode(ino); ino != 0 && (d == nil || !d.IsDir()) {
					ino = 0
				}
				pl.tgtDir[kp] = ino
			}
			pl.target(t, k, kp)
			continue
		}
		c := pl.content(t, k.ino)
		if c == 0 {
			continue
		}
		if pl.tpaths[c] == nil {
			pl.tpaths[c] = map[string]bool{}
		}
		pl.tpaths[c][kp] = true
		if in {
			pl.tgtFile[kp] = c
			if e, ok := pl.at[kp]; !ok || e.ino != c {
				pl.need[c]++
			}
		}
	}
}

// under lists the picture's paths in the subtree, sorted.
func (pl *planner) under() []string {
	var out []string
	for p := range pl.at {
		if within(p, pl.r.rel) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (pl *planner) step(a RestoreAction) { pl.steps = append(pl.steps, a) }

// drop takes entry p out of the picture (not what it holds).
func (pl *planner) drop(p string) sent {
	e := pl.at[p]
	delete(pl.at, p)
	pl.kids[parentOf(p)]--
	if e.dir() {
		delete(pl.kids, p)
		delete(pl.dirAt, e.ino)
	} else {
		delete(pl.paths[e.ino], p)
	}
	return e
}

// unlinked notes that file ino lost a name.
func (pl *planner) unlinked(ino uint64) {
	if pl.nlink[ino] > 0 {
		pl.nlink[ino]--
	}
	if pl.nlink[ino] == 0 && pl.keeps && metadata.Keepable(&shedfs.Inode{Mode: pl.mode[ino]}) {
		pl.kept[ino] = true
		delete(pl.entries, ino) // kept anew, under a name of now
	}
}

// put adds file ino at p.
func (pl *planner) put(ino uint64, p string) {
	pl.at[p] = sent{ino: ino, mode: pl.mode[ino]}
	pl.kids[parentOf(p)]++
	pl.link1(ino, p)
}

// replace takes the file at p out, before another takes its place; it
// returns its inode (0: p was free).
func (pl *planner) replace(p string) uint64 {
	e, ok := pl.at[p]
	if !ok {
		return 0
	}
	pl.drop(p)
	pl.unlinked(e.ino)
	return e.ino
}

func (pl *planner) trash(p string) {
	ino := pl.replace(p)
	pl.step(RestoreAction{Action: "trash", Path: pl.r.view(p), Ino: ino})
}

func (pl *planner) rmdir(p string) {
	e := pl.drop(p)
	pl.step(RestoreAction{Action: "rmdir", Path: pl.r.view(p), Ino: e.ino})
}

func (pl *planner) mkdir(p string) {
	pl.at[p] = sent{mode: syscall.S_IFDIR | 0o755}
	pl.kids[p] = 0
	pl.kids[parentOf(p)]++
	pl.step(RestoreAction{Action: "mkdir", Path: pl.r.view(p)})
}

// rename moves q (and all below it) to p, replacing the file there.
func (pl *planner) rename(q, p string) {
	replaces := pl.replace(p)
	e := pl.at[q]
	delete(pl.at, q)
	pl.kids[parentOf(q)]--
	pl.at[p] = e
	pl.kids[parentOf(p)]++
	if !e.dir() {
		delete(pl.paths[e.ino], q)
		pl.link1(e.ino, p)
	} else {
		pl.dirAt[e.ino] = p
		pl.kids[p] = pl.kids[q]
		delete(pl.kids, q)
		var below []string
		for k := range pl.at {
			if strings.HasPrefix(k, q+"/") {
				below = append(below, k)
			}
		}
		for _, k := range below {
			np := p + k[len(q):]
			v := pl.at[k]
			delete(pl.at, k)
			pl.at[np] = v
			if v.dir() {
				pl.kids[np] = pl.kids[k]
				delete(pl.kids, k)
				if v.ino != 0 {
					pl.dirAt[v.ino] = np
				}
			} else {
				delete(pl.paths[v.ino], k)
				pl.link1(v.ino, np)
			}
		}
	}
	pl.step(RestoreAction{Action: "rename-back", Path: pl.r.view(p), From: pl.r.view(q), Ino: e.ino, Replaces: replaces})
}

func (pl *planner) link(ino uint64, p string) {
	from := ""
	if q := pl.anyPath(ino); q != "" {
		from = pl.r.view(q)
	}
	pl.put(ino, p)
	pl.nlink[ino]++
	pl.step(RestoreAction{Action: "link", Path: pl.r.view(p), From: from, Ino: ino})
}

func (pl *planner) restore(ino uint64, p string) {
	entry := ""
	if e, ok := pl.entries[ino]; ok {
		entry = trashEntry(pl.r.req.User, e).Entry
	}
	replaces := pl.replace(p)
	delete(pl.kept, ino)
	delete(pl.entries, ino)
	pl.put(ino, p)
	pl.nlink[ino] = 1
	pl.step(RestoreAction{Action: "restore", Path: pl.r.view(p), Entry: entry, Ino: ino, Replaces: replaces})
}

// anyPath is the first of ino's names now, "" when none is known.
func (pl *planner) anyPath(ino uint64) string {
	var ps []string
	for p := range pl.paths[ino] {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	if len(ps) == 0 {
		return ""
	}
	return ps[0]
}

// spare is a name of file c now that the old tree does not give it, to
// rename it back from; "" when there is none.
func (pl *planner) spare(c uint64) string {
	var ps []string
	for q := range pl.paths[c] {
		if within(q, pl.r.rel) {
			if pl.tgtFile[q] != c {
				ps = append(ps, q)
			}
		} else if !pl.tpaths[c][q] {
			ps = append(ps, q)
		}
	}
	slices.Sort(ps)
	if len(ps) == 0 {
		return ""
	}
	return ps[0]
}

// parents makes sure the directories above p are there.
func (pl *planner) parents(p string) error {
	parts := split(parentOf(p))
	for i := range parts {
		a := strings.Join(parts[:i+1], "/")
		e, ok := pl.at[a]
		switch {
		case ok && e.dir():
			continue
		case ok && !within(a, pl.r.rel):
			return errorf(CodeExists, "cannot restore %s: %s is not a directory", pl.r.view(p), pl.r.view(a))
		case ok:
			pl.trash(a)
		}
		pl.mkdir(a)
	}
	return nil
}

// movable reports whether directory q may be renamed back to d: nothing
// of the old tree is at q or below it, and it holds neither the subtree
// nor d.
func (pl *planner) movable(q, d string) bool {
	_, isTarget := pl.tgtDir[q]
	return !isTarget && !within(pl.r.rel, q) && !within(d, q)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (pl *planner) steps1to4() error {
	// 1. Files that are nowhere in the old tree.
	for _, p := range pl.under() {
		e := pl.at[p]
		if e.dir() {
			continue
		}
		if _, ok := pl.tgtFile[p]; ok || pl.need[e.ino] > 0 {
			continue // the file of then replaces it; or moved to its place
		}
		pl.trash(p)
	}
	// 2. Directories, parents first (a path sorts before those below).
	for _, d := range sortedKeys(pl.tgtDir) {
		if err := pl.parents(d); err != nil {
			return err
		}
		if e, ok := pl.at[d]; ok {
			if e.dir() {
				continue
			}
			pl.trash(d)
		}
		if q, ok := pl.dirAt[pl.tgtDir[d]]; ok && pl.tgtDir[d] != 0 && q != d && pl.movable(q, d) {
			pl.rename(q, d)
			continue
		}
		pl.mkdir(d)
	}
	// 3. Files.
	pending := []string{}
	for _, p := range sortedKeys(pl.tgtFile) {
		if e, ok := pl.at[p]; !ok || e.ino != pl.tgtFile[p] {
			pending = append(pending, p)
		}
	}
	for len(pending) > 0 {
		var rest []string
		for _, p := range pending {
			done, err := pl.place(p)
			if err != nil {
				return err
			}
			if !done {
				rest = append(rest, p)
			}
		}
		if len(rest) == len(pending) {
			pl.unblock(rest[0])
		}
		pending = rest
	}
	// 4. What is left that the old tree does not have.
	under := pl.under()
	for _, p := range under {
		if e := pl.at[p]; !e.dir() && pl.tgtFile[p] != e.ino {
			pl.trash(p)
		}
	}
	for i := len(under) - 1; i >= 0; i-- {
		p := under[i]
		e, ok := pl.at[p]
		if _, keep := pl.tgtDir[p]; !ok || !e.dir() || keep || p == "" {
			continue
		}
		if pl.kids[p] == 0 {
			pl.rmdir(p)
		}
	}
	return nil
}

// place puts the old tree's file at p there, or reports that it must
// wait (done false): a file that must go elsewhere first, or a
// directory not yet emptied, stands there.
func (pl *planner) place(p string) (done bool, err error) {
	c := pl.tgtFile[p]
	e, occupied := pl.at[p]
	switch {
	case occupied && !e.dir() && e.ino == c:
		pl.need[c]--
		return true, nil
	case occupied && e.dir():
		if pl.kids[p] > 0 {
			return false, nil
		}
		pl.rmdir(p)
		occupied = false
	case occupied && pl.need[e.ino] > 0:
		return false, nil
	}
	if err := pl.parents(p); err != nil {
		return false, err
	}
	switch q := pl.spare(c); {
	case q != "":
		pl.rename(q, p)
	case pl.nlink[c] > 0:
		if occupied {
			pl.trash(p)
		}
		pl.link(c, p)
	case pl.kept[c]:
		pl.restore(c, p)
	}
	pl.need[c]--
	return true, nil
}

// unblock gets what stands at p out of the way when files wait on each
// other: a file goes to the trash (whence it is restored to its own
// place), a directory is emptied the same way and removed.
func (pl *planner) unblock(p string) {
	e := pl.at[p]
	if !e.dir() {
		pl.trash(p)
		return
	}
	var below []string
	for k := range pl.at {
		if strings.HasPrefix(k, p+"/") {
			below = append(below, k)
		}
	}
	slices.Sort(below)
	for _, k := range below {
		if !pl.at[k].dir() {
			pl.trash(k)
		}
	}
	for i := len(below) - 1; i >= 0; i-- {
		if pl.at[below[i]].dir() {
			pl.rmdir(below[i])
		}
	}
	pl.rmdir(p)
}
