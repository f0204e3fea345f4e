package daemon

import (
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// The tree as it was at a time, for restore --at: the entries of the zone
// now (the subtree and wherever the history says things went), with the
// history since the time undone, newest first, path by path. The history
// is the rename journal (renames, new names of existing inodes, removals
// the trash does not keep, records of kept files since restored) and the
// trash records (removals, versions), so that a restore's own changes —
// every one journaled or kept like a user's — are undone like any other.
// Inodes made since the time are then dropped: they were not there.

// hnode is one entry of the tree being taken back in time.
type hnode struct {
	ino  uint64 // 0: a directory known only as the parent of others
	dir  bool
	born time.Time // a removed directory's birth, from its journal record
	// born is set: the birth above holds (the inode is gone).
	bornKnown bool
	kids      map[string]*hnode
}

// htree is the zone's tree, rooted at the zone root.
type htree struct {
	root *hnode
	// content maps an inode to the version that held its content at
	// the time (a truncate since kept it), when one did.
	content map[uint64]uint64
}

func newHtree() *htree {
	return &htree{root: &hnode{dir: true, kids: map[string]*hnode{}}, content: map[uint64]uint64{}}
}

// split is the components of zone path p ("" for the root).
func split(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// lookup returns the node at p, or nil.
func (t *htree) lookup(p string) *hnode {
	n := t.root
	for _, c := range split(p) {
		if n == nil || !n.dir {
			return nil
		}
		n = n.kids[c]
	}
	return n
}

// detach takes the node at p out of the tree, or returns nil.
func (t *htree) detach(p string) *hnode {
	if p == "" {
		return nil
	}
	parent := t.lookup(path.Dir(clean(p)))
	if parent == nil || !parent.dir {
		return nil
	}
	base := path.Base(p)
	n := parent.kids[base]
	delete(parent.kids, base)
	return n
}

// clean is path.Dir's "." as the zone root.
func clean(p string) string {
	if p == "." {
		return ""
	}
	return p
}

// attach puts n at p, making the parents as directories known only by
// their paths. A directory put onto a directory merges with it (n's
// entries win, and its inode when it has one); anything else replaces
// what was there: the history says the name was free then.
func (t *htree) attach(p string, n *hnode) {
	if p == "" {
		return
	}
	parent := t.root
	for _, c := range split(path.Dir(p)) {
		if c == "." {
			break
		}
		next := parent.kids[c]
		if next == nil || !next.dir {
			next = &hnode{dir: true, kids: map[string]*hnode{}}
			parent.kids[c] = next
		}
		parent = next
	}
	base := path.Base(p)
	old := parent.kids[base]
	if old != nil && old.dir && n.dir {
		for name, k := range n.kids {
			old.kids[name] = k
		}
		if n.ino != 0 {
			old.ino, old.born, old.bornKnown = n.ino, n.born, n.bornKnown
		}
		return
	}
	if n.dir && n.kids == nil {
		n.kids = map[string]*hnode{}
	}
	parent.kids[base] = n
}

// hevent is one change of the history since the time.
type hevent struct {
	t   time.Time
	ino uint64
	metadata.RenameNote
}

// history returns the zone's changes since the time, oldest first: the
// journal's and the trash records'.
func (r *restorer) history(trash []metadata.TrashEntry) ([]hevent, error) {
	recs, err := r.l.st.Meta.RenamesSince(r.zone, r.req.At)
	if err != nil {
		return nil, asError(err, "read the rename journal")
	}
	var out []hevent
	for _, rec := range recs {
		out = append(out, hevent{t: rec.Time, ino: rec.Ino, RenameNote: rec.RenameNote})
	}
	for _, e := range trash {
		if e.Zone != r.zone || e.Time.Before(r.req.At) {
			continue
		}
		ev := hevent{t: e.Time, ino: e.Ino, RenameNote: metadata.RenameNote{Kind: metadata.JournalRemove, From: e.Path}}
		if e.Why == metadata.TrashTruncate {
			ev.RenameNote = metadata.RenameNote{Kind: metadata.JournalVersion, From: e.Path, Of: e.Of}
		}
		out = append(out, ev)
	}
	slices.SortStableFunc(out, func(a, b hevent) int { return a.t.Compare(b.t) })
	return out, nil
}

// undo takes the tree back before e.
func (t *htree) undo(e hevent) {
	switch e.Kind {
	case metadata.JournalRename:
		if n := t.detach(e.To); n != nil {
			t.attach(e.From, n)
		}
	case metadata.JournalExchange:
		a, b := t.detach(e.From), t.detach(e.To)
		if b != nil {
			t.attach(e.From, b)
		}
		if a != nil {
			t.attach(e.To, a)
		}
	case metadata.JournalAdd:
		if n := t.lookup(e.To); n != nil && !n.dir && n.ino == e.ino {
			t.detach(e.To)
		}
	case metadata.JournalRemove:
		n := &hnode{ino: e.ino, dir: e.Dir}
		if e.Dir {
			n.bornKnown = true
			if e.Born != 0 {
				n.born = time.Unix(0, e.Born)
			}
		}
		t.attach(e.From, n)
	case metadata.JournalVersion:
		of := e.Of
		if of == 0 { // a record from before versions named their file
			if n := t.lookup(e.From); n != nil && !n.dir {
				of = n.ino
			}
		}
		if of != 0 {
			t.content[of] = e.ino
		}
	}
}

// loadNow adds the zone's entries now at zone path p and below to the
// tree (and to the plan's picture of now, pl), with the directories
// above it.
func (r *restorer) loadNow(t *htree, pl *planner, p string) error {
	l := r.l
	root, _, err := l.resolve(r.req.User, r.view(""))
	if err != nil {
		return err
	}
	n, cur := root, ""
	for _, c := range split(p) {
		child, err := l.st.Meta.Lookup(n.Ino, c)
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return nil // nothing there now
		}
		if err != nil {
			return asError(err, "look up "+path.Join(cur, c))
		}
		cur = path.Join(cur, c)
		n = child
		if cur != p {
			pl.add(cur, n)
		}
	}
	var walk func(n *shedfs.Inode, zrel string) (*hnode, error)
	walk = func(n *shedfs.Inode, zrel string) (*hnode, error) {
		pl.add(zrel, n)
		h := &hnode{ino: n.Ino, dir: n.IsDir()}
		if !n.IsDir() {
			return h, nil
		}
		h.kids = map[string]*hnode{}
		entries, err := l.st.Meta.ReadDir(n.Ino)
		if err != nil {
			return nil, asError(err, "list "+zrel)
		}
		for _, de := range entries {
			c, err := l.st.Meta.GetInode(de.Ino)
			if err != nil {
				continue
			}
			k, err := walk(c, path.Join(zrel, de.Name))
			if err != nil {
				return nil, err
			}
			h.kids[de.Name] = k
		}
		return h, nil
	}
	h, err := walk(n, p)
	if err != nil {
		return err
	}
	if p == "" {
		t.root = h
		return nil
	}
	t.attach(p, h)
	return nil
}

// loadPaths are the zone paths whose entries now a restore of the
// subtree must know: the subtree, and wherever the history put things
// (what left the subtree since is below one of those).
func (r *restorer) loadPaths(events []hevent) []string {
	ps := []string{r.rel}
	for _, e := range events {
		switch e.Kind {
		case metadata.JournalRename, metadata.JournalAdd:
			ps = append(ps, e.To)
		case metadata.JournalExchange:
			ps = append(ps, e.From, e.To)
		}
	}
	slices.SortFunc(ps, func(a, b string) int { return len(a) - len(b) })
	var out []string
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(q string) bool { return within(p, q) }) {
			out = append(out, p)
		}
	}
	return out
}

// within reports whether zone path p is q or below it.
func within(p, q string) bool {
	return q == "" || p == q || strings.HasPrefix(p, q+"/")
}

// then builds the tree as it was at the time: the tree now, the history
// undone, and what was made since dropped.
func (r *restorer) then(pl *planner, trash []metadata.TrashEntry) (*htree, error) {
	events, err := r.history(trash)
	if err != nil {
		return nil, err
	}
	t := newHtree()
	for _, p := range r.loadPaths(events) {
		if err := r.loadNow(t, pl, p); err != nil {
			return nil, err
		}
	}
	for i := len(events) - 1; i >= 0; i-- {
		t.undo(events[i])
	}
	if err := r.dropNew(t.root, ""); err != nil {
		return nil, err
	}
	return t, nil
}

// dropNew removes from n's entries the inodes made since the time; a
// directory made since stays only as the parent of older entries.
func (r *restorer) dropNew(n *hnode, zrel string) error {
	for name, k := range n.kids {
		p := path.Join(zrel, name)
		if k.dir {
			if err := r.dropNew(k, p); err != nil {
				return err
			}
		}
		born := k.born
		if k.ino != 0 && !k.bornKnown {
			b, err := r.l.st.Meta.Birth(k.ino)
			if err != nil {
				return asError(err, "birth of "+p)
			}
			born = b
		}
		isNew := k.ino != 0 && !born.Before(r.req.At)
		switch {
		case !k.dir:
			if isNew {
				delete(n.kids, name)
			}
		case isNew || k.ino == 0:
			if len(k.kids) == 0 {
				delete(n.kids, name)
			} else {
				k.ino = 0
			}
		}
	}
	return nil
}
