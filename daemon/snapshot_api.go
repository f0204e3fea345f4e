package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// This file is the snapshot part of the admin API: POST /v1/snapshots
// (take one), GET /v1/snapshots[?user=U], GET and DELETE
// /v1/snapshots/{user}/{name}, and GET /v1/snapshots/{user}/{name}/diff
// [?other=NAME] (against another snapshot, or the view now).
//
// A snapshot freezes a subtree of a user's view: its records are written
// to the store (metadata/snapshots.go) and its regular files' blobs are
// linked, never copied (blobs/snapshot.go); the core copies a shared blob
// before the first change to it (vfs/cow.go), whichever door makes it.

// SnapshotAdmin is the snapshot operations, implemented by Local and
// Client like Admin.
type SnapshotAdmin interface {
	CreateSnapshot(ctx context.Context, req SnapshotCreateRequest) (*SnapshotInfo, error)
	ListSnapshots(ctx context.Context, user string) ([]SnapshotInfo, error)
	ShowSnapshot(ctx context.Context, user, name string) (*SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, user, name string) (*SnapshotInfo, error)
	DiffSnapshot(ctx context.Context, user, name, other string) (*SnapshotDiff, error)
}

var (
	_ SnapshotAdmin = (*Local)(nil)
	_ SnapshotAdmin = (*Client)(nil)
)

// SnapshotCreateRequest names the subtree to freeze: Path in the view of
// User, or in the scratch of its session Session.
type SnapshotCreateRequest struct {
	User    string `json:"user"`
	Session string `json:"session,omitempty"`
	Path    string `json:"path,omitempty"`
	Name    string `json:"name"`
	// TTLSeconds makes the snapshot expire (0: never).
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
	// MaxSnapshots refuses the snapshot when the user has that many
	// already (0: no limit).
	MaxSnapshots int `json:"max_snapshots,omitempty"`
	// unlisted keeps it out of snapshots/ in the view (a session's
	// start); only the daemon's own creates set it.
	unlisted bool
}

// SnapshotInfo is one snapshot.
type SnapshotInfo struct {
	Name    string    `json:"name"`
	User    string    `json:"user"`
	Session string    `json:"session,omitempty"`
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"`
	Entries int       `json:"entries"`
	// Bytes is the content it shows; OnlyBytes what only it still
	// holds (what deleting it frees), known on show and delete.
	Bytes     int64 `json:"bytes"`
	OnlyBytes int64 `json:"only_bytes"`
	// Open are the files that were open in a view when it was taken:
	// it holds their last flushed content.
	Open []string `json:"open,omitempty"`
	// Took is how long the create took.
	Took time.Duration `json:"took_ns,omitempty"`
}

// SnapshotDiff is what changed from a snapshot to another or to now.
type SnapshotDiff struct {
	From     string       `json:"from"`
	To       string       `json:"to"` // a snapshot name, or "now"
	Added    []DiffChange `json:"added"`
	Removed  []DiffChange `json:"removed"`
	Modified []DiffChange `json:"modified"`
	Renamed  []DiffChange `json:"renamed"`
	Modes    []DiffChange `json:"mode_changed"`
}

// DiffChange is one changed entry; paths are relative to the snapshot's
// root.
type DiffChange struct {
	Path      string `json:"path"`
	OldPath   string `json:"old_path,omitempty"`
	Type      string `json:"type"`
	OldSize   int64  `json:"old_size,omitempty"`
	NewSize   int64  `json:"new_size,omitempty"`
	OldSHA256 string `json:"old_sha256,omitempty"`
	NewSHA256 string `json:"new_sha256,omitempty"`
	OldMode   string `json:"old_mode,omitempty"`
	NewMode   string `json:"new_mode,omitempty"`
}

// snapshotRoot finds the root of a snapshot's subtree: path in user's
// view, or in the scratch of session. It returns the cleaned path.
func (l *Local) snapshotRoot(user, session, p string) (*shedfs.Inode, string, error) {
	if session == "" {
		return l.resolve(user, p)
	}
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, "", err
	}
	ss, err := l.st.Meta.GetSession(user, session)
	if err != nil {
		return nil, "", asError(err, fmt.Sprintf("no session %s of %s", session, user))
	}
	n, err := l.st.Meta.GetInode(ss.Root)
	if err != nil {
		return nil, "", asError(err, "session root")
	}
	rel := "."
	for _, name := range strings.Split(p, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			return nil, "", errorf(CodeInvalid, "path %q: \"..\" is not allowed", p)
		}
		if n, err = l.st.Meta.Lookup(n.Ino, name); err != nil {
			return nil, "", asError(err, fmt.Sprintf("no %s in session %s of %s", p, session, user))
		}
		rel = path.Join(rel, name)
	}
	return n, rel, nil
}

// walked is one entry of a live subtree.
type walked struct {
	rel string
	n   *shedfs.Inode
}

// walkTree lists the subtree at root, root first, parents before
// children, names in order.
func (l *Local) walkTree(root *shedfs.Inode) ([]walked, error) {
	out := []walked{{"", root}}
	for i := 0; i < len(out); i++ {
		w := out[i]
		if !w.n.IsDir() {
			continue
		}
		ents, err := l.st.Meta.ReadDir(w.n.Ino)
		if err != nil {
			return nil, fmt.Errorf("read directory %s: %w", w.rel, err)
		}
		slices.SortFunc(ents, func(a, b shedfs.DirEntry) int { return strings.Compare(a.Name, b.Name) })
		for _, e := range ents {
			n, err := l.st.Meta.GetInode(e.Ino)
			if errors.Is(err, syscall.ENOENT) {
				continue // gone meanwhile
			} else if err != nil {
				return nil, fmt.Errorf("read %s: %w", e.Name, err)
			}
			out = append(out, walked{path.Join(w.rel, e.Name), n})
		}
	}
	return out, nil
}

func snapEntryOf(w walked) metadata.SnapEntry {
	e := metadata.SnapEntry{Path: w.rel, Ino: w.n.Ino, Mode: w.n.Mode, Uid: w.n.Uid, Gid: w.n.Gid, Mtime: w.n.Mtime, Target: w.n.Target, Nlink: w.n.Nlink}
	if !w.n.IsDir() {
		e.Size = int64(w.n.Size)
	}
	return e
}

// validSnapshotName checks a snapshot name: it is a directory name in
// snapshots/ of the view.
func validSnapshotName(name string) error {
	if metadata.ValidPrincipal(name) != nil {
		return errorf(CodeInvalid, "invalid snapshot name %q: use 1 to 64 of a-z, 0-9, '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// CreateSnapshot freezes a subtree of a view, in time proportional to its
// entries: each regular file's blob is linked, under the core's open-file
// lock (Core.Freeze), so that the first later change copies it.
func (l *Local) CreateSnapshot(ctx context.Context, req SnapshotCreateRequest) (*SnapshotInfo, error) {
	start := time.Now()
	if err := validSnapshotName(req.Name); err != nil {
		return nil, err
	}
	if req.TTLSeconds < 0 || req.MaxSnapshots < 0 {
		return nil, errorf(CodeInvalid, "snapshot %s: --ttl and --max-snapshots must not be negative", req.Name)
	}
	root, rel, err := l.snapshotRoot(req.User, req.Session, req.Path)
	if err != nil {
		return nil, err
	}
	if !root.IsDir() {
		return nil, errorf(CodeInvalid, "snapshot %s: %s is not a directory; a snapshot is of a directory's tree", req.Name, rel)
	}
	if err := l.expireSnapshots(req.User); err != nil {
		return nil, err
	}
	if _, err := l.st.Meta.GetSnapshot(req.User, req.Name); err == nil {
		return nil, errorf(CodeExists, "%s has a snapshot named %s already", req.User, req.Name)
	}
	if req.MaxSnapshots > 0 {
		have, err := l.st.Meta.ListSnapshots(req.User)
		if err != nil {
			return nil, asError(err, "list snapshots")
		}
		if len(have) >= req.MaxSnapshots {
			return nil, errorf(CodeQuota, "%s has %d snapshots, the most --max-snapshots allows; delete one first", req.User, len(have))
		}
	}
	tree, err := l.walkTree(root)
	if err != nil {
		return nil, asError(err, "walk "+rel)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	sn := metadata.Snapshot{ID: hex.EncodeToString(rnd[:]), Name: req.Name, User: req.User, Session: req.Session, Path: rel,
		Holder: shedfs.HolderOf(root.Zone), Created: time.Now().UTC(), Entries: len(tree), Unlisted: req.unlisted}
	if req.TTLSeconds > 0 {
		sn.Expires = sn.Created.Add(time.Duration(req.TTLSeconds) * time.Second)
	}
	fail := func(err error, what string) (*SnapshotInfo, error) {
		if rerr := l.st.Meta.DeleteSnapshot(sn.User, "", sn.ID); rerr != nil {
			l.log.Warn("snapshot records of a failed create not removed", "id", sn.ID, "err", rerr)
		}
		if rerr := l.st.Blobs.RemoveSnap(sn.ID); rerr != nil {
			l.log.Warn("snapshot blobs of a failed create not removed", "id", sn.ID, "err", rerr)
		}
		return nil, asError(err, what)
	}
	entries := make([]metadata.SnapEntry, 0, len(tree))
	linked := map[uint64]int64{}
	for _, w := range tree {
		e := snapEntryOf(w)
		if w.n.IsRegular() {
			size, ok := linked[w.n.Ino]
			if !ok {
				open, err := l.core.Freeze(w.n.Ino, func() error {
					var err error
					size, err = l.st.Blobs.SnapLink(sn.ID, w.n.Ino)
					return err
				})
				if err != nil {
					return fail(err, "snapshot "+w.rel)
				}
				if open {
					sn.Open = append(sn.Open, w.rel)
				}
				linked[w.n.Ino] = size
				sn.Bytes += size
			}
			e.Size = size // the blob's, what was last written
		}
		entries = append(entries, e)
	}
	if err := l.st.Meta.PutSnapshotEntries(sn.ID, entries); err != nil {
		return fail(err, "write snapshot")
	}
	if err := l.st.Meta.PutSnapshot(sn); errors.Is(err, metadata.ErrSnapshotExists) {
		return fail(errorf(CodeExists, "%s has a snapshot named %s already", req.User, req.Name), "")
	} else if err != nil {
		return fail(err, "write snapshot")
	}
	if err := l.recountSnapshots(sn.Holder); err != nil {
		return nil, err
	}
	l.audit(req.User, root.Zone, rel, "snapshot_create", sn.Bytes)
	info := snapshotInfo(sn)
	info.Took = time.Since(start)
	return info, nil
}

func snapshotInfo(sn metadata.Snapshot) *SnapshotInfo {
	return &SnapshotInfo{Name: sn.Name, User: sn.User, Session: sn.Session, Path: sn.Path, Created: sn.Created, Expires: sn.Expires,
		Entries: sn.Entries, Bytes: sn.Bytes, Open: sn.Open}
}

// expireSnapshots deletes the snapshots of user (of everyone: "") whose
// time is up.
func (l *Local) expireSnapshots(user string) error {
	all, err := l.st.Meta.ListSnapshots(user)
	if err != nil {
		return asError(err, "list snapshots")
	}
	now := l.now()
	for _, sn := range all {
		if !sn.Expires.IsZero() && !now.Before(sn.Expires) {
			if err := l.deleteSnapshot(sn); err != nil {
				return err
			}
			l.log.Info("snapshot expired", "user", sn.User, "name", sn.Name)
		}
	}
	return nil
}

// deleteSnapshot removes a snapshot's header, then its entries and links:
// a blob only it held is freed.
func (l *Local) deleteSnapshot(sn metadata.Snapshot) error {
	if err := l.st.Meta.DeleteSnapshot(sn.User, sn.Name, sn.ID); err != nil {
		return asError(err, "delete snapshot "+sn.Name)
	}
	if err := l.st.Blobs.RemoveSnap(sn.ID); err != nil {
		return asError(err, "delete snapshot "+sn.Name)
	}
	return l.recountSnapshots(sn.Holder)
}

// recountSnapshots sets the bytes only h's snapshots hold from their
// links: a blob all of whose links are snapshots' is theirs alone, and
// charged once. Under h's admission lock, so that a copy-up's charge
// (vfs/cow.go) is either counted here or added after.
func (l *Local) recountSnapshots(h shedfs.Holder) error {
	if h == "" {
		return nil
	}
	unlock := l.core.Accountant().Lock(h)
	defer unlock()
	held, err := snapshotHeldOf(l.st, h)
	if err != nil {
		return err
	}
	if err := l.st.Meta.AddSnapshotHeld(h, held, true); err != nil {
		return asError(err, "charge snapshots of "+string(h))
	}
	return nil
}

// snapshotHeldOf counts the bytes only h's snapshots hold, from their
// links.
func snapshotHeldOf(st *Store, h shedfs.Holder) (int64, error) {
	all, err := st.Meta.ListSnapshots("")
	if err != nil {
		return 0, asError(err, "list snapshots")
	}
	type blob struct {
		links  int
		nlink  uint64
		charge int64
	}
	blobs := map[[2]uint64]*blob{}
	for _, sn := range all {
		if sn.Holder != h {
			continue
		}
		es, err := st.Meta.SnapshotEntries(sn.ID)
		if err != nil {
			return 0, asError(err, "read snapshot "+sn.Name)
		}
		seen := map[uint64]bool{}
		for _, e := range es {
			if e.Mode&syscall.S_IFMT != syscall.S_IFREG || seen[e.Ino] {
				continue
			}
			seen[e.Ino] = true
			var fi syscall.Stat_t
			if err := syscall.Stat(st.Blobs.SnapPath(sn.ID, e.Ino), &fi); err != nil {
				continue // never written: no link
			}
			k := [2]uint64{uint64(fi.Dev), fi.Ino}
			b := blobs[k]
			if b == nil {
				b = &blob{nlink: uint64(fi.Nlink), charge: shedfs.Charge(uint64(fi.Size))}
				blobs[k] = b
			}
			b.links++
		}
	}
	var held int64
	for _, b := range blobs {
		if uint64(b.links) >= b.nlink {
			held += b.charge
		}
	}
	return held, nil
}

// ListSnapshots returns the snapshots of user, of everyone if empty.
func (l *Local) ListSnapshots(ctx context.Context, user string) ([]SnapshotInfo, error) {
	if user != "" {
		if err := ValidPrincipalName("user", user); err != nil {
			return nil, err
		}
	}
	if err := l.expireSnapshots(user); err != nil {
		return nil, err
	}
	all, err := l.st.Meta.ListSnapshots(user)
	if err != nil {
		return nil, asError(err, "list snapshots")
	}
	out := []SnapshotInfo{}
	for _, sn := range all {
		out = append(out, *snapshotInfo(sn))
	}
	return out, nil
}

// getSnapshot returns user's snapshot name, a clear error if none.
func (l *Local) getSnapshot(user, name string) (*metadata.Snapshot, error) {
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, err
	}
	if err := validSnapshotName(name); err != nil {
		return nil, err
	}
	if err := l.expireSnapshots(user); err != nil {
		return nil, err
	}
	sn, err := l.st.Meta.GetSnapshot(user, name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("%s has no snapshot named %s", user, name))
	}
	return sn, nil
}

// ShowSnapshot returns one snapshot with the bytes only it holds.
func (l *Local) ShowSnapshot(ctx context.Context, user, name string) (*SnapshotInfo, error) {
	sn, err := l.getSnapshot(user, name)
	if err != nil {
		return nil, err
	}
	info := snapshotInfo(*sn)
	if info.OnlyBytes, err = l.snapshotOnly(sn); err != nil {
		return nil, err
	}
	if err := l.recountSnapshots(sn.Holder); err != nil {
		return nil, err
	}
	return info, nil
}

// snapshotOnly adds up the content only sn still holds.
func (l *Local) snapshotOnly(sn *metadata.Snapshot) (int64, error) {
	es, err := l.st.Meta.SnapshotEntries(sn.ID)
	if err != nil {
		return 0, asError(err, "read snapshot "+sn.Name)
	}
	var only int64
	seen := map[uint64]bool{}
	for _, e := range es {
		if e.Mode&syscall.S_IFMT != syscall.S_IFREG || seen[e.Ino] {
			continue
		}
		seen[e.Ino] = true
		size, alone, err := l.st.Blobs.SnapOwned(sn.ID, e.Ino)
		if err != nil {
			return 0, asError(err, "snapshot "+sn.Name)
		}
		if alone {
			only += size
		}
	}
	return only, nil
}

// DeleteSnapshot deletes a snapshot; what only it held is freed.
func (l *Local) DeleteSnapshot(ctx context.Context, user, name string) (*SnapshotInfo, error) {
	sn, err := l.getSnapshot(user, name)
	if err != nil {
		return nil, err
	}
	if err := l.startInUse(sn); err != nil {
		return nil, err
	}
	info := snapshotInfo(*sn)
	if info.OnlyBytes, err = l.snapshotOnly(sn); err != nil {
		return nil, err
	}
	if err := l.deleteSnapshot(*sn); err != nil {
		return nil, err
	}
	l.audit(user, shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: user}, sn.Path, "snapshot_delete", info.OnlyBytes)
	return info, nil
}

// diffSide is one side of a diff: its entries by path, and where each
// regular file's content is.
type diffSide struct {
	byPath  map[string]metadata.SnapEntry
	content func(e metadata.SnapEntry) string
}

// DiffSnapshot compares user's snapshot name with its snapshot other, or
// with the view now when other is "".
func (l *Local) DiffSnapshot(ctx context.Context, user, name, other string) (*SnapshotDiff, error) {
	sn, err := l.getSnapshot(user, name)
	if err != nil {
		return nil, err
	}
	from, err := l.snapshotSide(sn)
	if err != nil {
		return nil, err
	}
	d := &SnapshotDiff{From: name, To: "now"}
	var to *diffSide
	if other != "" {
		osn, err := l.getSnapshot(user, other)
		if err != nil {
			return nil, err
		}
		if to, err = l.snapshotSide(osn); err != nil {
			return nil, err
		}
		d.To = other
	} else {
		root, _, err := l.snapshotRoot(sn.User, sn.Session, sn.Path)
		if err != nil {
			return nil, err
		}
		if to, err = l.liveSide(root, sn.Path); err != nil {
			return nil, err
		}
	}
	if err := diffSides(d, from, to); err != nil {
		return nil, asError(err, "diff")
	}
	return d, nil
}

// liveSide is the live subtree at root (rel names it in errors) as a
// side of a diff, with each regular file's size as its blob holds it.
func (l *Local) liveSide(root *shedfs.Inode, rel string) (*diffSide, error) {
	tree, err := l.walkTree(root)
	if err != nil {
		return nil, asError(err, "walk "+rel)
	}
	s := &diffSide{byPath: make(map[string]metadata.SnapEntry, len(tree)), content: func(e metadata.SnapEntry) string { return l.st.Blobs.Path(e.Ino) }}
	for _, w := range tree {
		e := snapEntryOf(w)
		if st, err := os.Stat(l.st.Blobs.Path(w.n.Ino)); err == nil && w.n.IsRegular() {
			e.Size = st.Size()
		}
		s.byPath[w.rel] = e
	}
	return s, nil
}

func (l *Local) snapshotSide(sn *metadata.Snapshot) (*diffSide, error) {
	es, err := l.st.Meta.SnapshotEntries(sn.ID)
	if err != nil {
		return nil, asError(err, "read snapshot "+sn.Name)
	}
	s := &diffSide{byPath: make(map[string]metadata.SnapEntry, len(es)), content: func(e metadata.SnapEntry) string { return l.st.Blobs.SnapPath(sn.ID, e.Ino) }}
	for _, e := range es {
		s.byPath[e.Path] = e
	}
	return s, nil
}

func modeString(m uint32) string { return fmt.Sprintf("%04o", m&0o7777) }

func entryType(m uint32) string {
	return typeName(&shedfs.Inode{Mode: m})
}

// diffSides fills d with what changed from a to b.
func diffSides(d *SnapshotDiff, a, b *diffSide) error {
	var removed, added []metadata.SnapEntry
	for _, p := range snapPaths(a.byPath) {
		ea := a.byPath[p]
		eb, ok := b.byPath[p]
		if !ok || ea.Mode&syscall.S_IFMT != eb.Mode&syscall.S_IFMT {
			removed = append(removed, ea)
			if ok {
				added = append(added, eb)
			}
			continue
		}
		if ea.Mode != eb.Mode {
			d.Modes = append(d.Modes, DiffChange{Path: p, Type: entryType(ea.Mode), OldMode: modeString(ea.Mode), NewMode: modeString(eb.Mode)})
		}
		switch ea.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			c, same, err := compareContent(a.content(ea), b.content(eb), ea.Size, eb.Size)
			if err != nil {
				return err
			}
			if !same {
				c.Path, c.Type = p, "file"
				d.Modified = append(d.Modified, c)
			}
		case syscall.S_IFLNK:
			if ea.Target != eb.Target {
				d.Modified = append(d.Modified, DiffChange{Path: p, Type: "symlink", OldSize: int64(len(ea.Target)), NewSize: int64(len(eb.Target))})
			}
		}
	}
	for _, p := range snapPaths(b.byPath) {
		if _, ok := a.byPath[p]; !ok {
			added = append(added, b.byPath[p])
		}
	}
	// Renamed: the same inode under another path, on both sides.
	addedByIno := map[uint64]int{}
	for i, e := range added {
		addedByIno[e.Ino] = i
	}
	gone := map[int]bool{}
	for _, e := range removed {
		if i, ok := addedByIno[e.Ino]; ok && !gone[i] && added[i].Mode&syscall.S_IFMT == e.Mode&syscall.S_IFMT && !renamedWithParent(e, added[i], a, b) {
			gone[i] = true
			d.Renamed = append(d.Renamed, DiffChange{Path: added[i].Path, OldPath: e.Path, Type: entryType(e.Mode), OldSize: e.Size, NewSize: added[i].Size})
			continue
		} else if ok && added[i].Mode&syscall.S_IFMT == e.Mode&syscall.S_IFMT {
			gone[i] = true // moved with its directory: the directory's rename says it
			continue
		}
		c := DiffChange{Path: e.Path, Type: entryType(e.Mode), OldSize: e.Size}
		if e.Mode&syscall.S_IFMT == syscall.S_IFREG {
			sum, err := fileSHA256(a.content(e))
			if err != nil {
				return err
			}
			c.OldSHA256 = sum
		}
		d.Removed = append(d.Removed, c)
	}
	for i, e := range added {
		if gone[i] {
			continue
		}
		c := DiffChange{Path: e.Path, Type: entryType(e.Mode), NewSize: e.Size}
		if e.Mode&syscall.S_IFMT == syscall.S_IFREG {
			sum, err := fileSHA256(b.content(e))
			if err != nil {
				return err
			}
			c.NewSHA256 = sum
		}
		d.Added = append(d.Added, c)
	}
	return nil
}

// renamedWithParent reports whether an entry moved only because its
// parent directory was renamed (same name, parents of the same inode).
func renamedWithParent(old, cur metadata.SnapEntry, a, b *diffSide) bool {
	if path.Base(old.Path) != path.Base(cur.Path) {
		return false
	}
	pa, okA := a.byPath[path.Dir(old.Path)]
	if path.Dir(old.Path) == "." {
		pa, okA = a.byPath[""]
	}
	pb, okB := b.byPath[path.Dir(cur.Path)]
	if path.Dir(cur.Path) == "." {
		pb, okB = b.byPath[""]
	}
	return okA && okB && pa.Ino == pb.Ino && pa.Path != pb.Path
}

func snapPaths(m map[string]metadata.SnapEntry) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// compareContent compares two content files: the same blob (a link) is
// the same content without reading it; else their sha256 decide.
func compareContent(a, b string, sa, sb int64) (DiffChange, bool, error) {
	c := DiffChange{OldSize: sa, NewSize: sb}
	sta, errA := os.Stat(a)
	stb, errB := os.Stat(b)
	if errA == nil && errB == nil && os.SameFile(sta, stb) {
		return c, true, nil
	}
	var err error
	if c.OldSHA256, err = fileSHA256(a); err != nil {
		return c, false, err
	}
	if c.NewSHA256, err = fileSHA256(b); err != nil {
		return c, false, err
	}
	return c, sa == sb && c.OldSHA256 == c.NewSHA256, nil
}

// fileSHA256 hashes a content file; a missing one (never written) is
// empty.
func fileSHA256(p string) (string, error) {
	h := sha256.New()
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// snapshotRoutes adds the snapshot endpoints to the admin API.
func snapshotRoutes(h func(pattern string, fn endpoint), admin Admin) {
	sa, ok := admin.(SnapshotAdmin)
	if !ok {
		return
	}
	h("POST /v1/snapshots", created(route(jsonBody[SnapshotCreateRequest], sa.CreateSnapshot)))
	h("GET /v1/snapshots", route(queryArg("user"), sa.ListSnapshots))
	h("GET /v1/snapshots/{user}/{name}", route2(pathArg("user"), pathArg("name"), sa.ShowSnapshot))
	h("DELETE /v1/snapshots/{user}/{name}", route2(pathArg("user"), pathArg("name"), sa.DeleteSnapshot))
	h("GET /v1/snapshots/{user}/{name}/diff", route3(pathArg("user"), pathArg("name"), queryArg("other"), sa.DiffSnapshot))
	if sr, ok := admin.(SnapshotRestorer); ok {
		h("POST /v1/snapshots/restore", route(jsonBody[SnapshotRestoreRequest], sr.RestoreSnapshot))
	}
}

// CreateSnapshot asks the daemon to take a snapshot.
func (c *Client) CreateSnapshot(ctx context.Context, req SnapshotCreateRequest) (*SnapshotInfo, error) {
	return call[*SnapshotInfo](c, ctx, http.MethodPost, "/v1/snapshots", req)
}

// ListSnapshots asks the daemon for the snapshots of user (of everyone).
func (c *Client) ListSnapshots(ctx context.Context, user string) ([]SnapshotInfo, error) {
	p := "/v1/snapshots"
	if user != "" {
		p += "?" + url.Values{"user": {user}}.Encode()
	}
	return call[[]SnapshotInfo](c, ctx, http.MethodGet, p, nil)
}

// ShowSnapshot asks the daemon for one snapshot.
func (c *Client) ShowSnapshot(ctx context.Context, user, name string) (*SnapshotInfo, error) {
	return call[*SnapshotInfo](c, ctx, http.MethodGet, "/v1/snapshots/"+seg(user)+"/"+seg(name), nil)
}

// DeleteSnapshot asks the daemon to delete a snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, user, name string) (*SnapshotInfo, error) {
	return call[*SnapshotInfo](c, ctx, http.MethodDelete, "/v1/snapshots/"+seg(user)+"/"+seg(name), nil)
}

// DiffSnapshot asks the daemon what changed since a snapshot.
func (c *Client) DiffSnapshot(ctx context.Context, user, name, other string) (*SnapshotDiff, error) {
	p := "/v1/snapshots/" + seg(user) + "/" + seg(name) + "/diff"
	if other != "" {
		p += "?" + url.Values{"other": {other}}.Encode()
	}
	return call[*SnapshotDiff](c, ctx, http.MethodGet, p, nil)
}
