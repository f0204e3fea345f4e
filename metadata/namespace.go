package metadata

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// ValidEntryName checks a name for a new directory entry with the one rule of
// entry names, shedfs.CheckName: ENAMETOOLONG over MaxNameLen bytes, EINVAL
// for "", ".", "..", or a name containing '/' or NUL. The names a user
// chooses never reach the host file system, but they must still be names a
// POSIX tool can handle.
func ValidEntryName(name string) error {
	if e := shedfs.CheckName(name); e != 0 {
		return e
	}
	return nil
}

// lookupName checks a name that is only looked up: too long is
// ENAMETOOLONG, anything else is simply not found if it is not there.
func lookupName(name string) error {
	if len(name) > MaxNameLen {
		return syscall.ENAMETOOLONG
	}
	return nil
}

// GetInode returns the inode record, ENOENT if it does not exist.
func (s *Store) GetInode(ino uint64) (*shedfs.Inode, error) {
	var n *shedfs.Inode
	err := s.kv.View(func(tx Txn) error {
		var err error
		n, err = getInode(tx, &s.keys, ino)
		return err
	})
	return n, err
}

// Lookup returns the inode named name in directory parent. ENOENT if there is
// no such entry, ENOTDIR if parent is not a directory.
func (s *Store) Lookup(parent uint64, name string) (*shedfs.Inode, error) {
	if err := lookupName(name); err != nil {
		return nil, err
	}
	var n *shedfs.Inode
	err := s.view(func(o *op) error {
		child, _, err := o.entry(parent, name)
		if errors.Is(err, syscall.ENOENT) {
			// Only a miss pays for reading the parent, to tell ENOTDIR.
			if _, err := o.dir(parent); err != nil {
				return err
			}
			return syscall.ENOENT
		}
		if err != nil {
			return err
		}
		n, err = getInode(o.tx, o.k, child)
		if errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("entry %d/%q points at missing inode %d: %w", parent, name, child, syscall.EIO)
		}
		return err
	})
	return n, err
}

// ReadDir lists a directory in name order (not including . and ..).
func (s *Store) ReadDir(dir uint64) ([]shedfs.DirEntry, error) {
	var out []shedfs.DirEntry
	err := s.view(func(o *op) error {
		d, err := o.inode(dir)
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return syscall.ENOTDIR
		}
		return o.tx.Scan(o.k.entryPrefix(dir), nil, func(k, v []byte) error {
			ino, mode, err := decodeEntry(v)
			if err != nil {
				return fmt.Errorf("directory %d: %w", dir, err)
			}
			out = append(out, shedfs.DirEntry{Name: string(k[9:]), Ino: ino, Mode: mode})
			return nil
		})
	})
	return out, err
}

// Create adds a new inode named name in directory parent. From tmpl it takes
// Mode, Uid, Gid, Rdev, Target, Zone, Owner and OwnMode; it assigns Ino,
// Nlink (1, or 2 for a directory), all three times (now), Parent (for a
// directory) and Size (len(Target) for a symlink, else 0). The parent's
// mtime and ctime become now, and its Nlink grows by one for a directory.
// The zone holder's inode usage grows by one in the same transaction.
// Errors: EEXIST, ENOTDIR (parent), ENOENT (parent gone or unlinked),
// ENAMETOOLONG (> MaxNameLen bytes), EINVAL (empty, ".", "..", '/' or NUL).
// admit, when not nil, is called inside the transaction with the holder's
// current usage and limit; an error it returns aborts the create unchanged.
//
// A zero tmpl.Zone means the parent's zone; a different zone than the
// parent's is EXDEV, since an inode's zone is that of its directory.
func (s *Store) Create(parent uint64, name string, tmpl *shedfs.Inode, admit func(shedfs.Usage, shedfs.Limit) error) (*shedfs.Inode, error) {
	if err := ValidEntryName(name); err != nil {
		return nil, err
	}
	return s.create(parent, name, tmpl, admit, false)
}

// CreateTmp creates a regular file in directory parent's zone that no
// directory names (O_TMPFILE): Nlink 0 and an orphan record from the
// start, so it vanishes with its last user unless Link gives it a name.
// Charged and admitted like Create.
func (s *Store) CreateTmp(parent uint64, tmpl *shedfs.Inode, admit func(shedfs.Usage, shedfs.Limit) error) (*shedfs.Inode, error) {
	return s.createTmp(parent, tmpl, admit, false)
}

func (s *Store) createTmp(parent uint64, tmpl *shedfs.Inode, admit func(shedfs.Usage, shedfs.Limit) error, held bool) (*shedfs.Inode, error) {
	if tmpl == nil || tmpl.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("create tmpfile: not a regular file: %w", syscall.EINVAL)
	}
	return s.create(parent, "", tmpl, admit, held)
}

// create is Create, or CreateTmp when name is empty; held puts the open
// marker of the new file in the same transaction (CreateOpen).
func (s *Store) create(parent uint64, name string, tmpl *shedfs.Inode, admit func(shedfs.Usage, shedfs.Limit) error, held bool) (*shedfs.Inode, error) {
	if tmpl == nil {
		return nil, fmt.Errorf("create %q: no template: %w", name, syscall.EINVAL)
	}
	ino, err := s.allocIno()
	if err != nil {
		return nil, err
	}
	var created *shedfs.Inode
	err = s.update(func(o *op) error {
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		if name != "" {
			if _, _, err := o.entry(parent, name); err == nil {
				return syscall.EEXIST
			} else if !errors.Is(err, syscall.ENOENT) {
				return err
			}
		}
		zone := tmpl.Zone
		if zone.Kind == shedfs.ZoneNone {
			zone = p.Zone
		} else if zone != p.Zone {
			return fmt.Errorf("create %q in zone %s with zone %s: %w", name, p.Zone, zone, syscall.EXDEV)
		}
		h := shedfs.HolderOf(zone)
		if admit != nil {
			u, l, err := o.quota(h)
			if err != nil {
				return err
			}
			if err := admit(u, l); err != nil {
				return err
			}
		}
		n := &shedfs.Inode{
			Ino: ino, Mode: tmpl.Mode, Uid: tmpl.Uid, Gid: tmpl.Gid, Nlink: 1, Rdev: tmpl.Rdev,
			Atime: o.now, Mtime: o.now, Ctime: o.now,
			Zone: zone, Owner: tmpl.Owner, OwnMode: tmpl.OwnMode,
		}
		switch n.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			n.Nlink = 2
			n.Parent = parent
			p.Nlink++
		case syscall.S_IFLNK:
			n.Target = tmpl.Target
			n.Size = uint64(len(tmpl.Target))
		}
		if name == "" {
			n.Nlink = 0
			o.put(n)
			if err := o.tx.Set(orphanKey(n.Ino), []byte{}); err != nil {
				return err
			}
		} else {
			o.touchDir(p)
			o.put(n)
			if err := o.setEntry(parent, name, n); err != nil {
				return err
			}
			if n.IsDir() {
				o.newEmptyDir(n.Ino)
			}
		}
		if err := o.charge(h, 0, 1); err != nil {
			return err
		}
		if err := o.setBirth(n.Ino, o.now); err != nil {
			return err
		}
		if held {
			o.holdNew(n.Ino)
			o.newContent(n.Ino)
		}
		created = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

// Update applies fn to the inode in one read-modify-write transaction and
// returns the result. If fn changes Size of a regular file, the holder's
// byte usage moves by Charge(new)-Charge(old) in the same transaction, and
// admit (when not nil) is consulted first with the usage, the limit and
// that delta. fn must not change Ino, Zone, Nlink or Parent.
//
// fn may run more than once (on a commit conflict), each time on a fresh
// copy. Changing a field fn must not change, or the file type, is EINVAL.
func (s *Store) Update(ino uint64, fn func(n *shedfs.Inode) error, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) (*shedfs.Inode, error) {
	return s.updateInode(ino, fn, admit, nil)
}

// updateInode is Update with also, when not nil, run in the same
// transaction.
func (s *Store) updateInode(ino uint64, fn func(n *shedfs.Inode) error, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error, also func(o *op) error) (*shedfs.Inode, error) {
	var out *shedfs.Inode
	err := s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		before := *n
		if err := fn(n); err != nil {
			return err
		}
		if n.Ino != before.Ino || n.Zone != before.Zone || n.Nlink != before.Nlink ||
			n.Parent != before.Parent || n.Mode&syscall.S_IFMT != before.Mode&syscall.S_IFMT {
			return fmt.Errorf("update inode %d: identity, zone, link count or type changed: %w", ino, syscall.EINVAL)
		}
		if delta := chargeOf(n) - chargeOf(&before); n.Size != before.Size && n.IsRegular() {
			h := shedfs.HolderOf(n.Zone)
			if admit != nil {
				u, l, err := o.admission(h)
				if err != nil {
					return err
				}
				if err := admit(u, l, delta); err != nil {
					return err
				}
			}
			if err := o.charge(h, delta, 0); err != nil {
				return err
			}
		}
		o.put(n)
		out = n
		if also != nil {
			return also(o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Link adds name in newParent for the existing non-directory inode ino
// (Nlink+1, ctime now; newParent mtime/ctime now). EPERM for a directory,
// EEXIST if the name exists, EXDEV if newParent is in another zone. An
// inode without links (an O_TMPFILE file) gets its first one and stops
// being an orphan.
func (s *Store) Link(ino, newParent uint64, newName string) (*shedfs.Inode, error) {
	return s.LinkTrash(ino, newParent, newName, nil)
}

// LinkTrash is Link that, with a journal note (To: the new name's path
// within the zone), journals the new name for restores to a point in
// time (history.go).
func (s *Store) LinkTrash(ino, newParent uint64, newName string, journal *RenameNote) (*shedfs.Inode, error) {
	if err := ValidEntryName(newName); err != nil {
		return nil, err
	}
	if journal != nil {
		journal = s.stampedJournal(journal)
		journal.Kind = JournalAdd
	}
	var out *shedfs.Inode
	err := s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if n.IsDir() {
			return syscall.EPERM
		}
		wasOrphan := n.Nlink == 0
		p, err := o.dir(newParent)
		if err != nil {
			return err
		}
		if p.Zone != n.Zone {
			return syscall.EXDEV
		}
		if _, _, err := o.entry(newParent, newName); err == nil {
			return syscall.EEXIST
		} else if !errors.Is(err, syscall.ENOENT) {
			return err
		}
		if wasOrphan {
			// Only the kernel's linkat of an O_TMPFILE file reaches
			// here with no links: it refuses any other unlinked inode.
			if err := o.tx.Delete(orphanKey(n.Ino)); err != nil {
				return err
			}
		}
		n.Nlink++
		n.Ctime = o.now
		o.put(n)
		o.touchDir(p)
		out = n
		if journal != nil {
			if err := o.journalRename(n, journal); err != nil {
				return err
			}
		}
		return o.setEntry(newParent, newName, n)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Publish gives an unnamed regular file (made by CreateTmp and written
// while no directory named it) its final size, mtime and name in parent,
// all in one transaction, so that the name appears only with the whole
// content, and a crash before it leaves an orphan that the next start or
// fsck reclaims. The holder's byte usage moves by the size's charge, and
// admit (when not nil) is consulted first with the usage, the limit and
// the net delta: that charge, less the charge of a file replace frees.
//
// An existing name is EEXIST unless replace, which swaps the new file in
// for a regular file (EISDIR for a directory, EEXIST for anything else) and
// returns it with its link dropped, as Rename does, for the caller to
// Reclaim. EINVAL if ino is not an unnamed regular file; EXDEV if parent is
// in another zone.
func (s *Store) Publish(ino, parent uint64, name string, size uint64, mtime time.Time, replace bool, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) (replaced *shedfs.Inode, err error) {
	if err := ValidEntryName(name); err != nil {
		return nil, err
	}
	err = s.update(func(o *op) error {
		replaced = nil
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if !n.IsRegular() || n.Nlink != 0 {
			return fmt.Errorf("publish inode %d: not an unnamed regular file: %w", ino, syscall.EINVAL)
		}
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		if p.Zone != n.Zone {
			return syscall.EXDEV
		}
		var old *shedfs.Inode
		switch child, _, err := o.entry(parent, name); {
		case err == nil && !replace:
			return syscall.EEXIST
		case err == nil:
			if old, err = o.inode(child); err != nil {
				return fmt.Errorf("entry %d/%q points at missing inode %d: %w", parent, name, child, syscall.EIO)
			}
			if old.IsDir() {
				return syscall.EISDIR
			}
			if !old.IsRegular() {
				return syscall.EEXIST
			}
		case !errors.Is(err, syscall.ENOENT):
			return err
		}
		h := shedfs.HolderOf(n.Zone)
		before := chargeOf(n)
		n.Size = size
		delta := chargeOf(n) - before
		if old != nil {
			if err := o.dropLink(old); err != nil {
				return err
			}
			if old.Nlink == 0 {
				// Freed once reclaimed; admission counts it gone.
				delta -= chargeOf(old)
			}
			replaced = old
		}
		if admit != nil {
			u, l, err := o.admission(h)
			if err != nil {
				return err
			}
			if err := admit(u, l, delta); err != nil {
				return err
			}
		}
		if err := o.charge(h, chargeOf(n)-before, 0); err != nil {
			return err
		}
		if err := o.tx.Delete(orphanKey(ino)); err != nil {
			return err
		}
		n.Nlink = 1
		n.Mtime, n.Ctime = mtime, o.now
		o.put(n)
		o.touchDir(p)
		return o.setEntry(parent, name, n)
	})
	if err != nil {
		return nil, err
	}
	return replaced, nil
}

// Unlink removes name from parent. With dir set it behaves as rmdir
// (ENOTDIR if not a directory, ENOTEMPTY if it has entries), else as unlink
// (EISDIR for a directory). The inode's Nlink drops (a removed directory
// goes to 0); at 0 it is kept with an orphan record so open handles keep
// working, and the caller calls Reclaim once nothing holds it open. The
// parent's mtime/ctime become now and its Nlink drops for a directory.
// Returns the inode as it is after the change.
func (s *Store) Unlink(parent uint64, name string, dir bool) (*shedfs.Inode, error) {
	n, _, err := s.unlink(parent, name, dir, nil)
	return n, err
}

// UnlinkFree is Unlink that, when the inode loses its last link and
// unused(ino) says nothing holds it open, deletes it in the same
// transaction (as Reclaim would, freeing its charge) instead of leaving an
// orphan record; freed tells which happened. The caller removes the blob.
// One transaction instead of two is what makes rm -rf cheap.
func (s *Store) UnlinkFree(parent uint64, name string, dir bool, unused func(ino uint64) bool) (n *shedfs.Inode, freed bool, err error) {
	return s.unlink(parent, name, dir, unused)
}

func (s *Store) unlink(parent uint64, name string, dir bool, unused func(ino uint64) bool) (*shedfs.Inode, bool, error) {
	if err := lookupName(name); err != nil {
		return nil, false, err
	}
	var out *shedfs.Inode
	var freed bool
	err := s.update(func(o *op) error {
		var err error
		out, freed, _, err = o.unlink(parent, name, dir, unused, nil)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, freed, nil
}

// unlink is the transaction of Unlink, UnlinkFree and UnlinkTrash: with a
// note, a file losing its last link goes to the trash (kept).
func (o *op) unlink(parent uint64, name string, dir bool, unused func(ino uint64) bool, note *TrashNote) (out *shedfs.Inode, freed, kept bool, err error) {
	p, err := o.dir(parent)
	if err != nil {
		return nil, false, false, err
	}
	child, _, err := o.entry(parent, name)
	if err != nil {
		return nil, false, false, err
	}
	n, err := o.inode(child)
	if err != nil {
		return nil, false, false, fmt.Errorf("entry %d/%q points at missing inode %d: %w", parent, name, child, syscall.EIO)
	}
	if dir {
		if !n.IsDir() {
			return nil, false, false, syscall.ENOTDIR
		}
		empty, err := o.isEmptyDir(child)
		if err != nil {
			return nil, false, false, err
		}
		if !empty {
			return nil, false, false, syscall.ENOTEMPTY
		}
		p.Nlink--
	} else if n.IsDir() {
		return nil, false, false, syscall.EISDIR
	}
	if err := o.tx.Delete(o.k.entry(parent, name)); err != nil {
		return nil, false, false, err
	}
	o.touchDir(p)
	if kept, err := o.dropLinkKeep(n, note); err != nil || kept {
		return n, false, kept, err
	}
	if err := o.journalRemoved(n, note); err != nil {
		return nil, false, false, err
	}
	if n.Nlink > 0 || unused == nil || !unused(n.Ino) {
		return n, false, false, nil
	}
	if held, err := o.heldOpen(n.Ino, true); err != nil || held {
		return n, false, false, err // another daemon holds it (open.go)
	}
	if err := o.free(n); err != nil {
		return nil, false, false, err
	}
	return n, true, false, nil
}

// Rename moves oldParent/oldName to newParent/newName as renameat2 does,
// with flags RenameNoReplace (EEXIST if the target exists) or
// RenameExchange (both must exist; swapped atomically). A plain rename
// replaces an existing target of a compatible type (EISDIR/ENOTDIR
// otherwise, ENOTEMPTY for a non-empty directory) and returns it, with its
// Nlink dropped and an orphan record at 0, for the caller to Reclaim. EINVAL
// when a directory would move into its own subtree; EXDEV when the two
// parents are in different zones. Renaming an entry onto itself (or onto
// another link of the same inode) succeeds and changes nothing.
func (s *Store) Rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) (replaced *shedfs.Inode, err error) {
	return s.rename(oldParent, oldName, newParent, newName, flags, nil, nil)
}

// rename is Rename; keep, when not nil, is offered the replaced inode
// once it lost its link, and may move it to the trash.
func (s *Store) rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32, keep func(o *op, dst *shedfs.Inode) (bool, error), journal *RenameNote) (replaced *shedfs.Inode, err error) {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return nil, fmt.Errorf("rename flags %#x: %w", flags, syscall.EINVAL)
	}
	if err := lookupName(oldName); err != nil {
		return nil, err
	}
	if err := ValidEntryName(newName); err != nil {
		return nil, err
	}
	err = s.update(func(o *op) error {
		replaced = nil
		oldP, err := o.dir(oldParent)
		if err != nil {
			return err
		}
		newP, err := o.dir(newParent)
		if err != nil {
			return err
		}
		srcIno, _, err := o.entry(oldParent, oldName)
		if err != nil {
			return err
		}
		dstIno, _, err := o.entry(newParent, newName)
		dstExists := err == nil
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		if oldP.Zone != newP.Zone {
			return syscall.EXDEV
		}
		if flags&RenameNoReplace != 0 && dstExists {
			return syscall.EEXIST
		}
		if flags&RenameExchange != 0 && !dstExists {
			return syscall.ENOENT
		}
		if dstExists && dstIno == srcIno {
			return nil
		}
		src, err := o.inode(srcIno)
		if err != nil {
			return fmt.Errorf("entry %d/%q points at missing inode %d: %w", oldParent, oldName, srcIno, syscall.EIO)
		}
		if src.IsDir() {
			if inside, err := o.within(newParent, srcIno); err != nil {
				return err
			} else if inside {
				return syscall.EINVAL
			}
		}
		var dst *shedfs.Inode
		if dstExists {
			if dst, err = o.inode(dstIno); err != nil {
				return fmt.Errorf("entry %d/%q points at missing inode %d: %w", newParent, newName, dstIno, syscall.EIO)
			}
		}
		if flags&RenameExchange != 0 {
			if err := o.exchange(oldP, oldName, src, newP, newName, dst); err != nil || journal == nil {
				return err
			}
			x := *journal
			x.Kind = JournalExchange
			return o.journalRename(src, &x)
		}
		if dst != nil {
			switch {
			case src.IsDir() && !dst.IsDir():
				return syscall.ENOTDIR
			case !src.IsDir() && dst.IsDir():
				return syscall.EISDIR
			case dst.IsDir():
				empty, err := o.isEmptyDir(dstIno)
				if err != nil {
					return err
				}
				if !empty {
					return syscall.ENOTEMPTY
				}
				newP.Nlink-- // the replaced subdirectory goes away
			}
			if err := o.dropLink(dst); err != nil {
				return err
			}
			replaced = dst
			if keep != nil {
				if _, err := keep(o, dst); err != nil {
					return err
				}
			}
		}
		if err := o.tx.Delete(o.k.entry(oldParent, oldName)); err != nil {
			return err
		}
		if err := o.setEntry(newParent, newName, src); err != nil {
			return err
		}
		if src.IsDir() && oldParent != newParent {
			src.Parent = newParent
			oldP.Nlink--
			newP.Nlink++
		}
		src.Ctime = o.now
		o.put(src)
		o.touchDir(oldP)
		o.touchDir(newP)
		if journal != nil {
			return o.journalRename(src, journal)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return replaced, nil
}

// exchange swaps two entries (RENAME_EXCHANGE), moving Parent fields and
// subdirectory counts when directories change parents.
func (o *op) exchange(oldP *shedfs.Inode, oldName string, src, newP *shedfs.Inode, newName string, dst *shedfs.Inode) error {
	if dst.IsDir() {
		if inside, err := o.within(oldP.Ino, dst.Ino); err != nil {
			return err
		} else if inside {
			return syscall.EINVAL
		}
	}
	if err := o.setEntry(oldP.Ino, oldName, dst); err != nil {
		return err
	}
	if err := o.setEntry(newP.Ino, newName, src); err != nil {
		return err
	}
	if oldP.Ino != newP.Ino {
		if src.IsDir() {
			src.Parent = newP.Ino
			oldP.Nlink--
			newP.Nlink++
		}
		if dst.IsDir() {
			dst.Parent = oldP.Ino
			newP.Nlink--
			oldP.Nlink++
		}
	}
	src.Ctime, dst.Ctime = o.now, o.now
	o.put(src)
	o.put(dst)
	o.touchDir(oldP)
	o.touchDir(newP)
	return nil
}

// within reports whether directory ino is dir itself or lies below it,
// walking Parent pointers up from ino to its zone root.
func (o *op) within(ino, dir uint64) (bool, error) {
	for steps := 0; ino != 0; steps++ {
		if ino == dir {
			return true, nil
		}
		if steps > 1<<16 {
			return false, fmt.Errorf("parent chain of %d does not end: %w", ino, syscall.ELOOP)
		}
		n, err := o.inode(ino)
		if err != nil {
			return false, err
		}
		ino = n.Parent
	}
	return false, nil
}

// Reclaim deletes an inode whose Nlink is 0: its record, xattrs and orphan
// record, and uncharges its holder (one inode and its bytes). It returns the
// deleted inode so the caller removes its blob. ENOENT if already gone,
// EBUSY if the inode has links again, ErrHeld if a daemon sharing the store
// holds it open.
func (s *Store) Reclaim(ino uint64) (*shedfs.Inode, error) {
	return s.reclaim(ino, false)
}

// ReclaimIdle is Reclaim for a caller that knows no handle of this daemon
// holds ino (fusefs): a marker of this daemon's own is one kept after the
// last close (open.go), and goes with the inode.
func (s *Store) ReclaimIdle(ino uint64) (*shedfs.Inode, error) {
	return s.reclaim(ino, true)
}

func (s *Store) reclaim(ino uint64, others bool) (*shedfs.Inode, error) {
	var out *shedfs.Inode
	err := s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if n.Nlink != 0 {
			return syscall.EBUSY
		}
		if held, err := o.heldOpen(ino, others); err != nil {
			return err
		} else if held {
			return ErrHeld // open.go
		}
		if _, _, err := o.trashOf(ino); err == nil {
			return syscall.EBUSY // kept in the trash
		}
		xattrs, err := o.deleteInode(n)
		if err != nil {
			return err
		}
		out = n
		return o.charge(shedfs.HolderOf(n.Zone), -chargeOf(n)-xattrs, -1)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deleteInode removes an inode's record, xattrs, orphan record and (for a
// directory) its entries, without touching usage. It returns what the
// xattrs cost (XattrCost), for the caller to uncharge.
func (o *op) deleteInode(n *shedfs.Inode) (int64, error) {
	o.forget(n.Ino)
	var keys [][]byte
	var xattrs int64
	if err := o.tx.Scan(xattrPrefix(n.Ino), nil, func(k, v []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		xattrs += xattrKeyCost(k, v)
		return nil
	}); err != nil {
		return 0, err
	}
	if n.IsDir() {
		if err := o.tx.Scan(o.k.entryPrefix(n.Ino), nil, func(k, _ []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			return nil
		}); err != nil {
			return 0, err
		}
	}
	keys = append(keys, o.k.inode(n.Ino), orphanKey(n.Ino), birthKey(n.Ino))
	// A directory has no blob, so no content record: deleting absent
	// keys would write three tombstones per directory of an rm -rf.
	if !n.IsDir() {
		if err := o.deleteContent(n.Ino); err != nil {
			return 0, err
		}
	}
	for _, k := range keys {
		if err := o.tx.Delete(k); err != nil {
			return 0, fmt.Errorf("delete inode %d: %w", n.Ino, err)
		}
	}
	return xattrs, nil
}

// Orphans lists the inodes with Nlink 0 kept for open handles.
func (s *Store) Orphans() ([]uint64, error) {
	var out []uint64
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pOrphan}, nil, func(k, _ []byte) error {
			out = append(out, keyIno(k))
			return nil
		})
	})
	return out, err
}
