package vfs

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// The admin's restores: kept files put back (shedfs trash restore), and
// the steps of a restore to a point in time (shedfs restore --at), which
// the admin API plans and the core carries out one by one.

// Mkdirs returns directory p of the user's view, creating what is missing
// below its zone root as directories owned by the user, each admitted
// like a view's mkdir (InTxn).
func (a *Admin) Mkdirs(p string) (*shedfs.Inode, error) {
	c, user := a.c, a.v.user
	n, _, err := a.Resolve(p)
	if err == nil {
		if !n.IsDir() {
			return nil, adminErrorf(syscall.EEXIST, "%s in the view of %s is not a directory", p, user)
		}
		return n, nil
	}
	var ae *AdminError
	if !errors.As(err, &ae) || !errors.Is(ae.Err, syscall.ENOENT) || p == "." || p == "" {
		return nil, err
	}
	parent, err := a.Mkdirs(path.Dir(p))
	if err != nil {
		return nil, err
	}
	u, err := c.store.GetUser(user)
	if err != nil {
		return nil, adminErr(err, "no user named "+user)
	}
	tmpl := &shedfs.Inode{Mode: syscall.S_IFDIR | 0o755, Uid: u.Uid, Gid: u.Gid, Owner: user,
		OwnMode: zones.PolicyOf(parent.Zone.Kind).DefaultMode}
	var d *shedfs.Inode
	_, err = c.InTxn(shedfs.HolderOf(parent.Zone), 0, 1, func() (dec acl.Decision, err error) {
		d, err = c.store.Create(parent.Ino, path.Base(p), tmpl, AdmitInodes(&dec, 1))
		return dec, err
	})
	if err != nil {
		return nil, adminErr(err, fmt.Sprintf("create %s in the view of %s", p, user))
	}
	a.entryChanged(parent.Ino, parent.Zone, path.Base(p), nil, false)
	return d, nil
}

// RestoreKept puts kept file ino back at view path to of the user's
// view, creating its parent directories; what to named goes to the trash
// in its place. entry is its name in trash/ and kept the path it was kept
// from, for the refusals' lines; zone is the label of the zone it was
// kept from, which to must be in. It reports whether a file was replaced.
func (a *Admin) RestoreKept(ino uint64, entry, kept, zone, to string) (replaced bool, _ error) {
	c, user := a.c, a.v.user
	z, rel, ok := zones.ZonePath(user, to)
	if !ok || rel == "" {
		return false, adminErrorf(syscall.EINVAL, "cannot restore to %s: not a path inside a zone", to)
	}
	if z.Label() != zone {
		return false, adminErrorf(syscall.EINVAL, "cannot restore %s to %s: across zones (%s to %s)", kept, to, zone, z.Label())
	}
	dir, err := a.Mkdirs(path.Dir(to))
	if err != nil {
		return false, err
	}
	note := &metadata.TrashNote{By: user, Why: metadata.TrashRenameOver, Path: rel}
	if c.trashOff() {
		note = nil
	}
	base := path.Base(to)
	_, was, keptOld, err := c.store.RestoreTrash(ino, dir.Ino, base, note)
	if err != nil {
		return false, adminErr(err, fmt.Sprintf("restore %s to %s", entry, to))
	}
	a.entryChanged(dir.Ino, dir.Zone, base, was, !keptOld)
	c.TrashChanged()
	if err := c.store.Sync(); err != nil {
		return false, adminErr(err, "sync metadata")
	}
	a.Record(dir.Zone, "/"+to, "admin_trash_restore", 0)
	return was != nil, nil
}

// RestoreStep is one step of a restore to a point in time, as the admin
// API planned it: "rename-back" (From to Path), "trash", "restore" (kept
// file Ino back to Path), "link" (another name Path for Ino), "mkdir",
// "rmdir". Paths are from the user's view root.
type RestoreStep struct {
	Action   string
	Path     string
	From     string
	Ino      uint64
	Replaces uint64
}

// Restore carries out the steps of a restore of zone z in order, each
// after checking that the entries it names are still the ones planned for
// (EBUSY when not: something changed them meanwhile, and a new restore
// plans anew), and records each. It returns how many were done; the views
// are told of the trash's change once, at the end, done or not.
func (a *Admin) Restore(z shedfs.Zone, steps []RestoreStep) (done int, err error) {
	if len(steps) == 0 {
		return 0, nil
	}
	defer a.c.TrashChanged()
	for _, st := range steps {
		if err := a.restore(st); err != nil {
			return done, err
		}
		a.Record(z, "/"+st.Path, restoreOp(st.Action), 0)
		done++
	}
	return done, nil
}

// restoreOp is the audit op of a restore step: admin_restore_ and the
// action, except "restore", an entry put back from the trash, which would
// read admin_restore_restore.
func restoreOp(action string) string {
	if action == "restore" {
		return "admin_restore_from_trash"
	}
	return "admin_restore_" + strings.ReplaceAll(action, "-", "_")
}

// changedMeanwhile is the refusal of a step whose entry is not the one
// planned for.
func changedMeanwhile(p string) error {
	return adminErrorf(syscall.EBUSY, "%s changed while the restore ran; run it again", p)
}

// entryAt returns directory dir (view path) and what its entry name is
// (nil when there is none).
func (a *Admin) entryAt(p string) (dir, n *shedfs.Inode, err error) {
	dir, _, err = a.Resolve(path.Dir(p))
	if err != nil {
		return nil, nil, err
	}
	n, err = a.c.store.Lookup(dir.Ino, path.Base(p))
	if errors.Is(err, syscall.ENOENT) {
		return dir, nil, nil
	}
	if err != nil {
		return nil, nil, adminErr(err, "look up "+p)
	}
	return dir, n, nil
}

// expect checks that p holds ino (0: nothing).
func expect(p string, n *shedfs.Inode, ino uint64) error {
	switch {
	case n == nil && ino == 0:
		return nil
	case n == nil || n.Ino != ino:
		return changedMeanwhile(p)
	}
	return nil
}

func (a *Admin) zrel(p string) string {
	_, rel, _ := zones.ZonePath(a.v.user, p)
	return rel
}

func (a *Admin) restore(st RestoreStep) error {
	c := a.c
	off := c.trashOff()
	note := func(zrel string) *metadata.TrashNote {
		if off {
			return nil
		}
		return &metadata.TrashNote{By: a.v.user, Why: metadata.TrashRestore, Path: zrel}
	}
	journal := func(n metadata.RenameNote) *metadata.RenameNote {
		if off {
			return nil
		}
		return &n
	}
	dir, cur, err := a.entryAt(st.Path)
	if err != nil {
		return err
	}
	base := path.Base(st.Path)
	zrel := a.zrel(st.Path)
	switch st.Action {
	case "trash", "rmdir":
		if err := expect(st.Path, cur, st.Ino); err != nil {
			return err
		}
		n, freed, kept, err := c.store.UnlinkTrash(dir.Ino, base, st.Action == "rmdir", c.Unused, note(zrel))
		if err != nil {
			return adminErr(err, "remove "+st.Path)
		}
		if freed && n.IsRegular() {
			c.Freed([]*shedfs.Inode{n}, FreedPurge, false)
		}
		a.entryChanged(dir.Ino, dir.Zone, base, n, !kept && !freed)
	case "mkdir":
		if cur != nil {
			return changedMeanwhile(st.Path)
		}
		if _, err := a.Mkdirs(st.Path); err != nil {
			return err
		}
	case "rename-back":
		src, moved, err := a.entryAt(st.From)
		if err != nil {
			return err
		}
		if err := expect(st.From, moved, st.Ino); err != nil {
			return err
		}
		if err := expect(st.Path, cur, st.Replaces); err != nil {
			return err
		}
		var flags uint32
		if st.Replaces == 0 {
			flags = metadata.RenameNoReplace
		}
		replaced, kept, err := c.store.RenameTrash(src.Ino, path.Base(st.From), dir.Ino, base, flags,
			note(zrel), journal(metadata.RenameNote{From: a.zrel(st.From), To: zrel}))
		if err != nil {
			return adminErr(err, fmt.Sprintf("rename %s back to %s", st.From, st.Path))
		}
		a.entryChanged(src.Ino, src.Zone, path.Base(st.From), moved, false)
		a.entryChanged(dir.Ino, dir.Zone, base, replaced, replaced != nil && !kept && replaced.Nlink == 0)
	case "link":
		if cur != nil {
			return changedMeanwhile(st.Path)
		}
		if _, err := c.store.LinkTrash(st.Ino, dir.Ino, base, journal(metadata.RenameNote{Kind: metadata.JournalAdd, To: zrel})); err != nil {
			return adminErr(err, "link "+st.Path)
		}
		a.entryChanged(dir.Ino, dir.Zone, base, nil, false)
		a.inodeChanged(st.Ino, dir.Zone)
	case "restore":
		if err := expect(st.Path, cur, st.Replaces); err != nil {
			return err
		}
		_, replaced, kept, err := c.store.RestoreTrash(st.Ino, dir.Ino, base, note(zrel))
		if err != nil {
			return adminErr(err, "restore "+st.Path)
		}
		a.entryChanged(dir.Ino, dir.Zone, base, replaced, replaced != nil && !kept && replaced.Nlink == 0)
	default:
		return fmt.Errorf("restore: unknown step %q", st.Action)
	}
	return nil
}
