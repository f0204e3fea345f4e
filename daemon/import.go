package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// importChunk is how much of an import is copied between checks of the
// context and of the quota left.
const importChunk = 1 << 20

// importFileMode is the permission of an imported file: readable by
// whatever uid a container runs as, and never writable through a view
// anyway, since uploads/ is read-only.
const importFileMode = 0o644

// Import copies body into the user's uploads/ (under uploads/Session/ when
// a session is given, creating that directory), keeping Name. It is the one
// way files enter uploads/, since views may only read and delete there.
//
// The content goes to an inode no directory names yet; once it is whole
// and durable, one transaction gives it its size and its name (replacing
// the existing file with Replace, so a reader sees either the old or the
// new content, never a mixture). A crash before that leaves an orphan that
// the next start or fsck reclaims: the name appears complete or not at
// all. The user's byte and inode quotas apply through the accountant the
// views use, so bytes pending in files open for writing count: an import
// that does not fit fails with CodeQuota and leaves nothing behind. Its
// bytes are reserved while they stream in. While a replace is in flight
// both contents are charged; the admission allows for that, so a replace
// that fits once done is admitted.
func (l *Local) Import(ctx context.Context, req ImportRequest, body io.Reader, size int64) (*ImportResult, error) {
	if err := CheckImport(req); err != nil {
		return nil, err
	}
	u, err := l.st.Meta.GetUser(req.User)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", req.User))
	}
	rel := zones.NameUploads + "/" + req.Name
	if req.Session != "" {
		rel = zones.NameUploads + "/" + req.Session + "/" + req.Name
	}
	what := fmt.Sprintf("import of %s for user %s", rel, u.Name)
	dir, err := l.sessionDir(u, req.Session)
	if err != nil {
		return nil, err
	}
	var credit int64 // what the replaced file is charged
	existing, err := l.st.Meta.Lookup(dir, req.Name)
	switch {
	case err == nil && !req.Replace:
		return nil, existsError(rel, u.Name)
	case err == nil && !existing.IsRegular():
		return nil, errorf(CodeExists, "%s of user %s exists and is not a regular file; it cannot be replaced by an import", rel, u.Name)
	case err == nil:
		credit = shedfs.Charge(existing.Size)
	case !errors.Is(err, syscall.ENOENT):
		return nil, asError(err, what)
	}
	announced := uint64(0)
	if size >= 0 {
		announced = uint64(size)
	}
	res, err := l.claimImport(u.Name, announced, credit, what)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	tmpl := &shedfs.Inode{
		Mode: syscall.S_IFREG | importFileMode, Uid: u.Uid, Gid: u.Gid,
		Zone: zones.UploadsZone(u.Name), Owner: u.Name,
	}
	if err := l.room(shedfs.ChargeUnit, 1, what); err != nil {
		return nil, err
	}
	var n *shedfs.Inode
	_, err = l.core.InTxn(shedfs.UserHolder(u.Name), 0, 1, func() (d acl.Decision, err error) {
		n, err = l.st.Meta.CreateTmp(dir, tmpl, vfs.AdmitInodes(&d, 1))
		return d, err
	})
	switch {
	case errors.Is(err, syscall.EDQUOT):
		return nil, l.quotaError(u.Name, what+": no inode left in the quota")
	case err != nil:
		return nil, asError(err, what)
	}
	written, err := l.writeImport(ctx, u.Name, n.Ino, body, res, what)
	if err == nil {
		err = l.examineImport(ctx, n.Ino, written, tmpl.Zone, what)
	}
	if err != nil {
		l.discard(n.Ino)
		return nil, err
	}
	var replaced *shedfs.Inode
	err = res.Commit(func() error {
		var err error
		replaced, err = l.st.Meta.Publish(n.Ino, dir, req.Name, uint64(written), time.Now(), req.Replace, res.Admit)
		return err
	})
	switch {
	case err == nil:
	case errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.EISDIR):
		l.discard(n.Ino)
		return nil, existsError(rel, u.Name)
	case errors.Is(err, syscall.EDQUOT):
		l.discard(n.Ino)
		return nil, l.quotaError(u.Name, fmt.Sprintf("%s (%s)", what, FormatSize(written)))
	default:
		l.discard(n.Ino)
		return nil, asError(err, what)
	}
	l.core.EntryChanged(dir, req.Name, replaced, true)
	if err := l.st.Meta.Sync(); err != nil {
		return nil, asError(err, what+": sync metadata")
	}
	result := &ImportResult{User: u.Name, Path: rel, Ino: n.Ino, Size: written, Replaced: replaced != nil}
	l.audit(u.Name, zones.UploadsZone(u.Name), "/"+rel, "import", written)
	l.log.Info("imported", "user", u.Name, "path", rel, "bytes", written, "replaced", result.Replaced)
	return result, nil
}

// existsError is the refusal of an import whose name is taken.
func existsError(rel, user string) error {
	return errorf(CodeExists, "%s of user %s already exists; add --replace to overwrite it", rel, user)
}

// checkImport checks the names of an import request, with the line the
// operator reads.
func CheckImport(req ImportRequest) error {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return err
	}
	if err := checkEntryName("file", req.Name); err != nil {
		return err
	}
	if req.Session != "" {
		if err := checkEntryName("session", req.Session); err != nil {
			return err
		}
	}
	return nil
}

// checkEntryName applies the name rule of a view (shedfs.CheckName) to a
// name the admin chose.
func checkEntryName(kind, name string) error {
	switch shedfs.CheckName(name) {
	case 0:
		return nil
	case syscall.ENAMETOOLONG:
		return errorf(CodeInvalid, "%s name %.40q... is too long (%d bytes; at most %d)", kind, name, len(name), shedfs.MaxNameLen)
	default:
		return errorf(CodeInvalid, "invalid %s name %q: not empty, \".\" or \"..\", and without '/' or NUL", kind, name)
	}
}

// sessionDir returns the directory an import goes to: the user's uploads
// root, or its session directory, created on first use.
func (l *Local) sessionDir(u *shedfs.User, session string) (uint64, error) {
	if session == "" {
		return u.Roots.Uploads, nil
	}
	rel := zones.NameUploads + "/" + session
	for range 3 {
		d, err := l.st.Meta.Lookup(u.Roots.Uploads, session)
		switch {
		case err == nil && d.IsDir():
			return d.Ino, nil
		case err == nil:
			return 0, errorf(CodeExists, "%s of user %s exists and is not a directory", rel, u.Name)
		case !errors.Is(err, syscall.ENOENT):
			return 0, asError(err, fmt.Sprintf("look up %s of user %s", rel, u.Name))
		}
		tmpl := &shedfs.Inode{
			Mode: syscall.S_IFDIR | 0o755, Uid: u.Uid, Gid: u.Gid,
			Zone: zones.UploadsZone(u.Name), Owner: u.Name,
		}
		_, err = l.core.InTxn(shedfs.UserHolder(u.Name), 0, 1, func() (dec acl.Decision, err error) {
			d, err = l.st.Meta.Create(u.Roots.Uploads, session, tmpl, vfs.AdmitInodes(&dec, 1))
			return dec, err
		})
		switch {
		case err == nil:
			l.core.EntryChanged(u.Roots.Uploads, session, nil, false)
			return d.Ino, nil
		case errors.Is(err, syscall.EDQUOT):
			return 0, l.quotaError(u.Name, fmt.Sprintf("create %s of user %s: no inode left in the quota", rel, u.Name))
		case !errors.Is(err, syscall.EEXIST):
			return 0, asError(err, fmt.Sprintf("create %s of user %s", rel, u.Name))
		}
		// Created meanwhile by another import: look it up again.
	}
	return 0, errorf(CodeBusy, "create %s of user %s: it keeps changing; retry", rel, u.Name)
}

// room refuses growth of the store by bytes and inodes that its disk has
// no room for (the core's admission of the disk, which evicts the oldest
// kept files first, as the views' does); without a guard (a store open
// read-only) there is nothing to refuse.
func (l *Local) room(bytes, inodes int64, what string) error {
	adm, d, err := l.core.Admit(vfs.Growth{Disk: bytes, DiskInodes: inodes})
	if err != nil {
		return asError(err, what)
	}
	if !d.Allowed() {
		return errorf(CodeNoSpace, "%s: the store's disk is full (%s)", what, d.Reason)
	}
	adm.Done()
	return nil
}

// claimImport admits an import of the announced size (0 when unknown;
// writeImport reserves the rest as it streams) through the accountant, and
// refuses early one known not to fit, so that nothing is copied in vain.
func (l *Local) claimImport(user string, size uint64, credit int64, what string) (*vfs.Claim, error) {
	if d := acl.AdmitSize(size, l.maxFileSize()); !d.Allowed() {
		return nil, errorf(CodeTooLarge, "%s: %s is larger than the largest file allowed", what, FormatSize(int64(min(size, uint64(1<<62)))))
	}
	res, d, err := l.core.Claim(shedfs.UserHolder(user), shedfs.Charge(size), credit)
	if err != nil {
		return nil, asError(err, what)
	}
	if !d.Allowed() {
		return nil, l.quotaError(user, fmt.Sprintf("%s (%s)", what, FormatSize(int64(size))))
	}
	return res, nil
}

// quotaError is the line an operator reads when a user's quota is full.
func (l *Local) quotaError(user, what string) *Error {
	h := shedfs.UserHolder(user)
	us, err1 := l.core.Accountant().Usage(h)
	lim, err2 := l.st.Meta.GetLimit(h)
	if err1 != nil || err2 != nil {
		return errorf(CodeQuota, "%s: over the quota of user %s", what, user)
	}
	return errorf(CodeQuota, "%s: over the quota of user %s (%s of %s used, %d of %s inodes)", what, user,
		FormatSize(us.Bytes), sizeLimit(lim.Bytes), us.Inodes, countLimit(lim.Inodes))
}

func sizeLimit(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return FormatSize(n)
}

func countLimit(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// writeImport copies body into the blob of ino and makes it durable. Bytes
// beyond what res holds are reserved as they come, so the copy stops as
// soon as the content passes the file size limit or what the user's quota
// has left (plus what a replace frees), before it fills the disk.
func (l *Local) writeImport(ctx context.Context, user string, ino uint64, body io.Reader, res *vfs.Claim, what string) (int64, error) {
	f, err := l.st.Blobs.OpenFile(ino, true)
	if err != nil {
		return 0, asError(err, what)
	}
	defer f.Close()
	buf := make([]byte, importChunk)
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, errorf(CodeInternal, "%s: interrupted after %s: %v", what, FormatSize(written), err)
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			next := written + int64(n)
			if !acl.AdmitSize(uint64(next), l.maxFileSize()).Allowed() {
				return 0, errorf(CodeTooLarge, "%s: larger than the largest file allowed", what)
			}
			if more := shedfs.Charge(uint64(next)) - res.Held(); more > 0 {
				d, err := res.Grow(more, 0)
				if err != nil {
					return 0, asError(err, what)
				}
				if !d.Allowed() {
					return 0, l.quotaError(user, fmt.Sprintf("%s (more than %s)", what, FormatSize(written)))
				}
			}
			if err := l.room(int64(n), 0, what); err != nil {
				return 0, err
			}
			if _, err := f.Write(buf[:n]); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					return 0, errorf(CodeNoSpace, "%s: the store's disk is full", what)
				}
				return 0, asError(err, what+": write")
			}
			written = next
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, errorf(CodeInvalid, "%s: reading the content failed after %s: %v", what, FormatSize(written), rerr)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, asError(err, what+": fsync")
	}
	if err := l.st.Blobs.SyncDir(ino); err != nil {
		return 0, asError(err, what+": fsync")
	}
	return written, nil
}

// discard removes the unnamed inode of a failed import and its blob. A
// failure here leaves an orphan, which the next start or fsck reclaims.
func (l *Local) discard(ino uint64) {
	if _, err := l.st.Meta.Reclaim(ino); err != nil && !errors.Is(err, syscall.ENOENT) {
		l.log.Warn("undo import: reclaim", "ino", ino, "err", err)
		return
	}
	if err := l.st.Blobs.Remove(ino); err != nil {
		l.log.Warn("undo import: remove blob", "ino", ino, "err", err)
	}
}
