package vfs

import (
	"fmt"
	"os"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// ForkSource is the tree a fork copies: a snapshot's entries, whose
// content its links hold, or a live tree's, whose blobs are linked as a
// snapshot links them (Core.Freeze).
type ForkSource struct {
	// Entries are the tree's, root first, parents before children, with
	// paths relative to the root.
	Entries []metadata.SnapEntry
	// Snapshot is the id of the snapshot holding the content; "" for a
	// live tree.
	Snapshot string
	// Open, when set, opens the content of an entry outside the store (a
	// base directory of the host), which is cloned or copied, never
	// linked: the host's file must not change with the session's.
	Open func(e metadata.SnapEntry) (*os.File, error)
}

// Forked is what a fork made.
type Forked struct {
	Entries int
	// Bytes is the content the new files show, charged to the session
	// as a copy would be, though no byte is copied.
	Bytes int64
	// Open are the live files that were open in a view: the fork has
	// their last flushed content.
	Open []string
}

// Fork fills the scratch of session ss, just opened and empty, with a
// copy-on-write copy of src in time proportional to its entries: every
// regular file's blob is a hard link of the source's, which the first
// change through any door copies (cow.go, cow_fork.go). The copy is
// charged to the session, and its user, as a copy would be, and refused
// (EDQUOT) when it does not fit. Hard links within the tree stay hard
// links; xattrs are not copied. A fork that fails leaves the entries made
// so far, which the caller removes with the session.
func (a *Admin) Fork(ss *metadata.Session, src ForkSource) (*Forked, error) {
	c := a.c
	what := fmt.Sprintf("fork into session %s of %s", ss.ID, ss.User)
	out := &Forked{}
	var files, others int64
	seen := map[uint64]bool{}
	for _, e := range src.Entries {
		if e.Path == "" {
			continue
		}
		if e.Mode&syscall.S_IFMT == syscall.S_IFREG {
			if seen[e.Ino] {
				continue
			}
			seen[e.Ino] = true
			files += shedfs.Charge(uint64(e.Size))
		}
		others++
	}
	h := shedfs.SessionHolder(ss.User, ss.ID)
	// A first check, which evicts the trash for room; each batch of the
	// store's transactions decides again.
	g := Growth{Holder: h, Bytes: files, Inodes: others}
	if src.Open != nil {
		g.Disk = files // copied (a clone, where it works, takes less)
	}
	_, d, err := c.Admit(g)
	if err != nil {
		return nil, adminErr(err, what)
	}
	if !d.Allowed() {
		return nil, adminErrorf(d.Errno, "%s: %s of content and %d entries do not fit the quota of the session or of %s", what, shedfs.FormatSize(files), others, ss.User)
	}
	es, err := a.linkFork(ss, src, out)
	if err != nil {
		return nil, adminErr(err, what)
	}
	admit := func(u shedfs.Usage, l shedfs.Limit, bytes, inodes int64) error {
		if d := acl.AdmitInodes(u, l, inodes); !d.Allowed() {
			return adminErrorf(d.Errno, "%s: over the quota (%s)", what, d.Reason)
		}
		if d := acl.AdmitBytes(u, l, bytes); !d.Allowed() {
			return adminErrorf(d.Errno, "%s: over the quota (%s)", what, d.Reason)
		}
		return nil
	}
	if err := c.store.ForkTree(ss.Root, ss.User, es, admit); err != nil {
		return nil, adminErr(err, what)
	}
	// A view may have listed the scratch (home/sessions/ID) meanwhile.
	c.versions.bump(ss.Root)
	c.fanOut(a.v, shedfs.SessionZone(ss.User, ss.ID), DirOf(ss.Root))
	out.Entries = len(src.Entries)
	return out, nil
}

// linkFork gives each new regular file its source's blob by a link, before
// any record names it (a crash leaves only blobs of no inode, which fsck
// removes), and returns the entries to make with their new numbers and
// the sizes the links hold.
func (a *Admin) linkFork(ss *metadata.Session, src ForkSource, out *Forked) ([]metadata.ForkEntry, error) {
	c := a.c
	inos, err := c.store.AllocInos(len(src.Entries))
	if err != nil {
		return nil, err
	}
	es := make([]metadata.ForkEntry, 0, len(src.Entries))
	sizes := map[uint64]int64{}
	for i, e := range src.Entries {
		fe := metadata.ForkEntry{SnapEntry: e, Ino: inos[i], Copied: src.Open != nil}
		if e.Mode&syscall.S_IFMT == syscall.S_IFREG {
			size, ok := sizes[e.Ino]
			if !ok {
				if size, err = a.linkForked(src, e, fe.Ino, out); err != nil {
					return nil, err
				}
				sizes[e.Ino] = size
				out.Bytes += size
			}
			fe.Size = size // the blob's, what was last written
		}
		es = append(es, fe)
	}
	return es, nil
}

// linkForked links the content of source file e to inode ino and returns
// its size.
func (a *Admin) linkForked(src ForkSource, e metadata.SnapEntry, ino uint64, out *Forked) (int64, error) {
	c := a.c
	if src.Open != nil {
		return a.copyForked(src, e, ino)
	}
	if src.Snapshot != "" {
		return c.blobs.LinkFrom(c.blobs.SnapPath(src.Snapshot, e.Ino), ino)
	}
	var size int64
	open, err := c.Freeze(e.Ino, func() error {
		var err error
		size, err = c.blobs.LinkFrom(c.blobs.Path(e.Ino), ino)
		return err
	})
	if open {
		out.Open = append(out.Open, e.Path)
	}
	return size, err
}

// copyForked gives inode ino a clone or copy of e's content from outside
// the store, and returns its size.
func (a *Admin) copyForked(src ForkSource, e metadata.SnapEntry, ino uint64) (int64, error) {
	in, err := src.Open(e)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", e.Path, err)
	}
	defer in.Close()
	out, err := a.c.blobs.OpenFresh(ino)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	if err := cloneOrCopy(out, in); err != nil {
		return 0, fmt.Errorf("copy %s: %w", e.Path, err)
	}
	st, err := out.Stat()
	if err != nil {
		return 0, err
	}
	if err := out.Sync(); err != nil {
		return 0, err
	}
	return st.Size(), a.c.blobs.Durable(ino)
}
