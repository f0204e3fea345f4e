package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/zones"
)

// importChunk is how much of an import is copied between checks of the
// context and of the quota left.
const importChunk = 1 << 20

// importFileMode is the permission of an imported file: readable by
// whatever uid a container runs as, and never writable through a view
// anyway, since uploads/ is read-only.
const importFileMode = 0o644

// Import is a file the admin puts into the user's uploads/.
type Import struct {
	// Session, when set, puts it under uploads/Session/ (created on
	// first use).
	Session string
	Name    string
	// Replace swaps an existing regular file for it.
	Replace bool
	Body    io.Reader
	// Size is the announced size, -1 when unknown.
	Size int64
	// Examine, when set, runs on the complete and durable content before
	// it is named (the digest and the scan); its error is the import's,
	// as it is, and nothing is stored.
	Examine func(ctx context.Context, ino uint64, size int64, z shedfs.Zone, what string) error
}

// Imported is what an import stored.
type Imported struct {
	// Path is the file's path in the user's view (uploads/...).
	Path     string
	Ino      uint64
	Size     int64
	Replaced bool
}

// Import copies in.Body into the user's uploads/ (under uploads/Session/
// when a session is given, creating that directory), keeping in.Name. It
// is the one way files enter uploads/, since views may only read and
// delete there.
//
// The content goes to an inode no directory names yet; once it is whole
// and durable, one transaction gives it its size and its name (replacing
// the existing file with Replace, so a reader sees either the old or the
// new content, never a mixture). A crash before that leaves an orphan that
// the next start or fsck reclaims: the name appears complete or not at
// all. Its bytes are admitted as they stream in (Claim), with the quota
// counting what files open for writing hold pending and the trash evicted
// for room as for a view's write; an import that does not fit fails with
// EDQUOT and leaves nothing behind. While a replace is in flight both
// contents are charged; the admission allows for that, so a replace that
// fits once done is admitted.
func (a *Admin) Import(ctx context.Context, in Import) (*Imported, error) {
	c := a.c
	u, err := c.store.GetUser(a.v.user)
	if err != nil {
		return nil, adminErr(err, fmt.Sprintf("no user named %s", a.v.user))
	}
	rel := zones.NameUploads + "/" + in.Name
	if in.Session != "" {
		rel = zones.NameUploads + "/" + in.Session + "/" + in.Name
	}
	what := fmt.Sprintf("import of %s for user %s", rel, u.Name)
	dir, err := a.sessionDir(u, in.Session)
	if err != nil {
		return nil, err
	}
	var credit int64 // what the replaced file is charged
	existing, err := c.store.Lookup(dir, in.Name)
	switch {
	case err == nil && !in.Replace:
		return nil, existsError(rel, u.Name)
	case err == nil && !existing.IsRegular():
		return nil, adminErrorf(syscall.EEXIST, "%s of user %s exists and is not a regular file; it cannot be replaced by an import", rel, u.Name)
	case err == nil:
		credit = shedfs.Charge(existing.Size)
	case !errors.Is(err, syscall.ENOENT):
		return nil, adminErr(err, what)
	}
	announced := uint64(0)
	if in.Size >= 0 {
		announced = uint64(in.Size)
	}
	cl, err := a.claimImport(announced, credit, what)
	if err != nil {
		return nil, err
	}
	defer cl.Release()
	z := zones.UploadsZone(u.Name)
	tmpl := &shedfs.Inode{
		Mode: syscall.S_IFREG | importFileMode, Uid: u.Uid, Gid: u.Gid,
		Zone: z, Owner: u.Name,
	}
	if err := c.adminRoom(shedfs.ChargeUnit, 1, what); err != nil {
		return nil, err
	}
	var n *shedfs.Inode
	_, err = c.InTxn(shedfs.UserHolder(u.Name), 0, 1, func() (d acl.Decision, err error) {
		n, err = c.store.CreateTmp(dir, tmpl, AdmitInodes(&d, 1))
		return d, err
	})
	switch {
	case errors.Is(err, syscall.EDQUOT):
		return nil, a.quotaError(what + ": no inode left in the quota")
	case err != nil:
		return nil, adminErr(err, what)
	}
	written, err := a.writeImport(ctx, n.Ino, in.Body, cl, what)
	if err == nil && in.Examine != nil {
		err = in.Examine(ctx, n.Ino, written, z, what)
	}
	if err != nil {
		c.discard(n.Ino)
		return nil, err
	}
	var replaced *shedfs.Inode
	err = cl.Commit(func() error {
		var err error
		replaced, err = c.store.Publish(n.Ino, dir, in.Name, uint64(written), time.Now(), in.Replace, cl.Admit)
		return err
	})
	switch {
	case err == nil:
	case errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.EISDIR):
		c.discard(n.Ino)
		return nil, existsError(rel, u.Name)
	case errors.Is(err, syscall.EDQUOT):
		c.discard(n.Ino)
		return nil, a.quotaError(fmt.Sprintf("%s (%s)", what, shedfs.FormatSize(written)))
	default:
		c.discard(n.Ino)
		return nil, adminErr(err, what)
	}
	a.entryChanged(dir, z, in.Name, replaced, true)
	if err := c.store.Sync(); err != nil {
		return nil, adminErr(err, what+": sync metadata")
	}
	a.Record(z, "/"+rel, "import", written)
	return &Imported{Path: rel, Ino: n.Ino, Size: written, Replaced: replaced != nil}, nil
}

// existsError is the refusal of an import whose name is taken.
func existsError(rel, user string) error {
	return adminErrorf(syscall.EEXIST, "%s of user %s already exists; add --replace to overwrite it", rel, user)
}

// sessionDir returns the directory an import goes to: the user's uploads
// root, or its session directory, created on first use.
func (a *Admin) sessionDir(u *shedfs.User, session string) (uint64, error) {
	c := a.c
	if session == "" {
		return u.Roots.Uploads, nil
	}
	rel := zones.NameUploads + "/" + session
	z := zones.UploadsZone(u.Name)
	for range 3 {
		d, err := c.store.Lookup(u.Roots.Uploads, session)
		switch {
		case err == nil && d.IsDir():
			return d.Ino, nil
		case err == nil:
			return 0, adminErrorf(syscall.EEXIST, "%s of user %s exists and is not a directory", rel, u.Name)
		case !errors.Is(err, syscall.ENOENT):
			return 0, adminErr(err, fmt.Sprintf("look up %s of user %s", rel, u.Name))
		}
		tmpl := &shedfs.Inode{
			Mode: syscall.S_IFDIR | 0o755, Uid: u.Uid, Gid: u.Gid,
			Zone: z, Owner: u.Name,
		}
		_, err = c.InTxn(shedfs.UserHolder(u.Name), 0, 1, func() (dec acl.Decision, err error) {
			d, err = c.store.Create(u.Roots.Uploads, session, tmpl, AdmitInodes(&dec, 1))
			return dec, err
		})
		switch {
		case err == nil:
			a.entryChanged(u.Roots.Uploads, z, session, nil, false)
			return d.Ino, nil
		case errors.Is(err, syscall.EDQUOT):
			return 0, a.quotaError(fmt.Sprintf("create %s of user %s: no inode left in the quota", rel, u.Name))
		case !errors.Is(err, syscall.EEXIST):
			return 0, adminErr(err, fmt.Sprintf("create %s of user %s", rel, u.Name))
		}
		// Created meanwhile by another import: look it up again.
	}
	return 0, adminErrorf(syscall.EBUSY, "create %s of user %s: it keeps changing; retry", rel, u.Name)
}

// adminRoom refuses growth of the store by bytes and inodes that its disk
// has no room for (Admit's disk, which evicts the oldest kept files
// first, as for the views); without a guard (a store open read-only)
// there is nothing to refuse.
func (c *Core) adminRoom(bytes, inodes int64, what string) error {
	adm, d, err := c.Admit(Growth{Disk: bytes, DiskInodes: inodes})
	if err != nil {
		return adminErr(err, what)
	}
	if !d.Allowed() {
		return adminErrorf(syscall.ENOSPC, "%s: the store's disk is full (%s)", what, d.Reason)
	}
	adm.Done()
	return nil
}

// AdminRoom is adminRoom for the admin operations that add principals
// (their zone roots): what names the growth in the refusal's line.
func (c *Core) AdminRoom(bytes, inodes int64, what string) error {
	return c.adminRoom(bytes, inodes, what)
}

// claimImport admits an import of the announced size (0 when unknown;
// writeImport claims the rest as it streams), and refuses early one known
// not to fit, so that nothing is copied in vain.
func (a *Admin) claimImport(size uint64, credit int64, what string) (*Claim, error) {
	c := a.c
	if d := acl.AdmitSize(size, c.maxFileSizeNow()); !d.Allowed() {
		return nil, adminErrorf(syscall.EFBIG, "%s: %s is larger than the largest file allowed", what, shedfs.FormatSize(int64(min(size, uint64(1<<62)))))
	}
	cl, d, err := c.Claim(shedfs.UserHolder(a.v.user), shedfs.Charge(size), credit)
	if err != nil {
		return nil, adminErr(err, what)
	}
	if !d.Allowed() {
		return nil, a.quotaError(fmt.Sprintf("%s (%s)", what, shedfs.FormatSize(int64(size))))
	}
	return cl, nil
}

// quotaError is the line an operator reads when the user's quota is
// full.
func (a *Admin) quotaError(what string) error {
	c, user := a.c, a.v.user
	h := shedfs.UserHolder(user)
	us, err1 := c.acct.Usage(h)
	lim, err2 := c.store.GetLimit(h)
	if err1 != nil || err2 != nil {
		return adminErrorf(syscall.EDQUOT, "%s: over the quota of user %s", what, user)
	}
	return adminErrorf(syscall.EDQUOT, "%s: over the quota of user %s (%s of %s used, %d of %s inodes)", what, user,
		shedfs.FormatSize(us.Bytes), sizeLimit(lim.Bytes), us.Inodes, countLimit(lim.Inodes))
}

func sizeLimit(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return shedfs.FormatSize(n)
}

func countLimit(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// writeImport copies body into the blob of ino and makes it durable.
// Bytes beyond what cl holds are claimed as they come, so the copy stops
// as soon as the content passes the file size limit or what the user's
// quota has left (plus what a replace frees), before it fills the disk.
func (a *Admin) writeImport(ctx context.Context, ino uint64, body io.Reader, cl *Claim, what string) (int64, error) {
	c := a.c
	f, err := c.blobs.OpenFresh(ino)
	if err != nil {
		return 0, adminErr(err, what)
	}
	defer f.Close()
	maxSize := c.maxFileSizeNow()
	buf := make([]byte, importChunk)
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, &AdminError{Err: err, Msg: fmt.Sprintf("%s: interrupted after %s", what, shedfs.FormatSize(written))}
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			next := written + int64(n)
			if !acl.AdmitSize(uint64(next), maxSize).Allowed() {
				return 0, adminErrorf(syscall.EFBIG, "%s: larger than the largest file allowed", what)
			}
			if more := shedfs.Charge(uint64(next)) - cl.Held(); more > 0 {
				d, err := cl.Grow(more, 0)
				if err != nil {
					return 0, adminErr(err, what)
				}
				if !d.Allowed() {
					return 0, a.quotaError(fmt.Sprintf("%s (more than %s)", what, shedfs.FormatSize(written)))
				}
			}
			if err := c.adminRoom(int64(n), 0, what); err != nil {
				return 0, err
			}
			if _, err := f.Write(buf[:n]); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					return 0, adminErrorf(syscall.ENOSPC, "%s: the store's disk is full", what)
				}
				return 0, adminErr(err, what+": write")
			}
			written = next
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, adminErrorf(syscall.EINVAL, "%s: reading the content failed after %s: %v", what, shedfs.FormatSize(written), rerr)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, adminErr(err, what+": fsync")
	}
	if err := c.blobs.SyncDir(ino); err != nil {
		return 0, adminErr(err, what+": fsync")
	}
	if err := c.blobs.Durable(ino); err != nil {
		return 0, adminErr(err, what+": upload")
	}
	return written, nil
}

// discard removes the unnamed inode of a failed import and its blob. A
// failure here leaves an orphan, which the next start or fsck reclaims.
func (c *Core) discard(ino uint64) {
	if _, err := c.store.Reclaim(ino); err != nil && !errors.Is(err, syscall.ENOENT) {
		c.log.Warn("undo import: reclaim", "ino", ino, "err", err)
		return
	}
	if err := c.blobs.Remove(ino); err != nil {
		c.log.Warn("undo import: remove blob", "ino", ino, "err", err)
	}
}
