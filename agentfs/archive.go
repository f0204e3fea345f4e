package agentfs

import (
	"archive/zip"
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// ArchiveLimits bound zip and unzip.
type ArchiveLimits struct {
	// MaxEntries and MaxBytes bound the entries and the uncompressed
	// bytes of one archive, packed or unpacked.
	MaxEntries int
	MaxBytes   uint64
	// MaxRatio bounds an unpacked entry's uncompressed to compressed
	// size (for entries of 1 MiB and more).
	MaxRatio uint64
}

// DefaultArchiveLimits are the bounds unless set.
var DefaultArchiveLimits = ArchiveLimits{MaxEntries: 10_000, MaxBytes: 1 << 30, MaxRatio: 100}

// ratioFloor is the size from which an entry's compression ratio counts.
const ratioFloor = 1 << 20

// newFile is a regular file being made through the core, written in
// order: an io.Writer for archive/zip.
type newFile struct {
	f    *FS
	dir  entry
	name string
	p    string
	rec  *shedfs.Inode
	h    *vfs.Handle
	off  int64
}

// create makes the new regular file p (ALREADY_EXISTS if it is there),
// open for writing through the core.
func (f *FS) create(p string, access acl.Access) (*newFile, *Error) {
	dir, name, ferr := f.parent(p)
	if ferr != nil {
		return nil, ferr
	}
	fp := path.Join(dir.p, name)
	if ferr := f.allow(access, fp, acl.OpCreate, dir.at.Zone); ferr != nil {
		return nil, ferr
	}
	if dir.groups {
		return nil, f.fail(f.v.RefuseGroups(acl.OpCreate, name), fp)
	}
	if _, ferr := f.child(dir, name); ferr == nil {
		return nil, errorf(CodeExists, fp, "already exists: choose another name, or delete it first")
	} else if ferr.Code != CodeNotFound {
		return nil, ferr
	}
	rec, errno := f.v.Create(f.caller, dir.at, name, 0o644)
	if errno != 0 {
		return nil, f.fail(errno, fp)
	}
	h, _, errno := f.v.OpenNew(dir.at, name, rec, syscall.O_WRONLY)
	if errno != 0 {
		f.v.Uncreate(dir.at, name, rec)
		return nil, f.fail(errno, fp)
	}
	h.Bind(paths(fp))
	return &newFile{f: f, dir: dir, name: name, p: fp, rec: rec, h: h}, nil
}

func (w *newFile) Write(b []byte) (int, error) {
	if ferr := w.f.writeAll(w.h, b, w.off, w.p); ferr != nil {
		return 0, ferr
	}
	w.off += int64(len(b))
	return len(b), nil
}

// close ends the write; when it failed (err), the file is taken back:
// a refused archive leaves nothing behind.
func (w *newFile) close(err error) error {
	if errno := w.h.Flush(); errno != 0 && err == nil {
		err = w.f.fail(errno, w.p)
	}
	w.h.Release()
	if err != nil {
		w.f.v.Uncreate(w.dir.at, w.name, w.rec)
	}
	return err
}

// handleAt reads a handle of the core at offsets: an io.ReaderAt for
// archive/zip, which reads the central directory first.
type handleAt struct{ h *vfs.Handle }

func (r handleAt) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		got, errno := r.h.Read(b[n:], off+int64(n))
		if errno != 0 {
			return n, errno
		}
		if got == 0 {
			return n, io.EOF
		}
		n += got
	}
	return n, nil
}

// Zipped is what zip made.
type Zipped struct {
	Info
	Entries int `json:"entries"`
	// Bytes is the uncompressed size of what was packed.
	Bytes uint64 `json:"bytes"`
	// Skipped are the symlinks and special files not packed.
	Skipped []string `json:"skipped,omitempty"`
}

// Zip packs the files and directories srcs (with what is in them) into
// the new archive dst, written through the core; names in the archive
// are the sources' paths from their parent directory. Symlinks are not
// followed (they are skipped, and listed).
func (f *FS) Zip(ctx context.Context, srcs []string, dst string, lim ArchiveLimits) (*Zipped, error) {
	if len(srcs) == 0 {
		return nil, errorf(CodeInvalidArgument, dst, "give the files or directories to pack")
	}
	if !strings.HasSuffix(strings.ToLower(dst), ".zip") {
		return nil, errorf(CodeInvalidArgument, dst, "the archive's name must end in .zip")
	}
	clean, err := shedfs.CleanViewPath(dst)
	if err != nil {
		return nil, pathError(dst, err)
	}
	if ferr := f.allow(acl.AccessArchive|acl.AccessWrite, clean, acl.OpCreate, f.v.RootZone()); ferr != nil {
		return nil, ferr
	}
	var tops []entry
	for _, s := range srcs {
		e, ferr := f.reach(s, acl.AccessArchive|acl.AccessRead, acl.OpRead, true)
		if ferr != nil {
			return nil, ferr
		}
		if e.p == "" {
			return nil, errorf(CodeInvalidArgument, s, "pack directories of the view, not its root")
		}
		tops = append(tops, e)
	}
	w, ferr := f.create(clean, acl.AccessArchive|acl.AccessWrite)
	if ferr != nil {
		return nil, ferr
	}
	out := &Zipped{}
	zw := zip.NewWriter(w)
	add := func(e entry, name string) error {
		if out.Entries++; lim.MaxEntries > 0 && out.Entries > lim.MaxEntries {
			return errorf(CodeFileTooLarge, e.p, "more than %d entries: pack less at a time", lim.MaxEntries)
		}
		if e.p == w.p {
			out.Entries--
			return nil
		}
		switch {
		case e.groups || e.rec.IsDir():
			_, err := zw.CreateHeader(&zip.FileHeader{Name: name + "/", Modified: mtime(e), Method: zip.Store})
			return err
		case !e.rec.IsRegular():
			out.Entries--
			out.Skipped = append(out.Skipped, e.p)
			return nil
		}
		if f.grant != nil && !acl.CheckGrant(*f.grant, f.v.Door(), acl.AccessRead, e.p).Allowed() {
			out.Entries--
			return nil
		}
		if out.Bytes += e.rec.Size; lim.MaxBytes > 0 && out.Bytes > lim.MaxBytes {
			return errorf(CodeFileTooLarge, e.p, "more than %d bytes to pack: pack less at a time", lim.MaxBytes)
		}
		h, _, errno := f.v.Open(ctx, e.at, syscall.O_RDONLY)
		if errno != 0 {
			return f.fail(errno, e.p)
		}
		h.Bind(paths(e.p))
		defer h.Release()
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Modified: mtime(e), Method: zip.Deflate})
		if err != nil {
			return err
		}
		_, err = io.Copy(fw, io.LimitReader(&handleReader{h: h}, int64(e.rec.Size)))
		return err
	}
	var werr error
	for _, top := range tops {
		base := path.Dir(top.p)
		rel := func(p string) string {
			if base == "." {
				return p
			}
			return strings.TrimPrefix(p, base+"/")
		}
		if werr = add(top, rel(top.p)); werr != nil {
			break
		}
		if top.groups || top.rec.IsDir() {
			cut, ferr := f.tree(top, func(e entry) bool {
				werr = add(e, rel(e.p))
				return werr != nil
			})
			if werr == nil && ferr != nil {
				werr = ferr
			}
			if werr == nil && cut {
				werr = errorf(CodeFileTooLarge, top.p, "more than %d entries to look at: pack less at a time", MaxVisit)
			}
			if werr != nil {
				break
			}
		}
	}
	if werr == nil {
		werr = zw.Close()
	}
	if err := w.close(werr); err != nil {
		return nil, archiveError(err, clean)
	}
	in, err := f.Stat(clean)
	if err != nil {
		return nil, err
	}
	out.Info = in
	return out, nil
}

func mtime(e entry) time.Time {
	if e.rec == nil {
		return time.Now()
	}
	return e.rec.Mtime
}

func archiveError(err error, p string) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errno, ok := err.(syscall.Errno); ok {
		return fromErrno(errno, p, "")
	}
	return errorf(CodeInvalidArgument, p, "the archive: %v", err)
}

// openZip opens archive p and reads its central directory.
func (f *FS) openZip(ctx context.Context, p string) (entry, *vfs.Handle, *zip.Reader, *Error) {
	e, h, ferr := f.openRead(ctx, p)
	if ferr != nil {
		return entry{}, nil, nil, ferr
	}
	zr, err := zip.NewReader(handleAt{h}, int64(e.rec.Size))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		h.Release()
		return entry{}, nil, nil, errorf(CodeInvalidArgument, e.p, "not a zip archive (or a damaged one): %v", err)
	}
	return e, h, zr, nil
}

func archiveEntry(zf *zip.File) acl.ArchiveEntry {
	m := zf.Mode()
	return acl.ArchiveEntry{
		Name: strings.TrimSuffix(zf.Name, "/"), Dir: m.IsDir(), Special: !m.IsDir() && !m.IsRegular(),
		Size: zf.UncompressedSize64, Compressed: zf.CompressedSize64,
	}
}

// ZipEntry is one entry of an archive, as zipinfo shows it.
type ZipEntry struct {
	Name       string    `json:"name"`
	Dir        bool      `json:"dir,omitempty"`
	Size       uint64    `json:"size"`
	Compressed uint64    `json:"compressed"`
	Modified   time.Time `json:"modified"`
	Mode       string    `json:"mode"`
	// Refused, when set, is the rule unzip would refuse this entry by.
	Refused string `json:"refused,omitempty"`
}

// ZipListing is what zipinfo answers.
type ZipListing struct {
	Path    string     `json:"path"`
	Count   int        `json:"count"`
	Bytes   uint64     `json:"bytes"`
	Entries []ZipEntry `json:"entries"`
	// Truncated says the entries were cut at the limit (Count and Bytes
	// are the whole archive's).
	Truncated bool `json:"truncated,omitempty"`
}

// ZipInfo lists archive p's entries, at most limit of them.
func (f *FS) ZipInfo(ctx context.Context, p string, limit int) (*ZipListing, error) {
	if limit < 1 {
		return nil, errorf(CodeInvalidArgument, p, "limit must be at least 1")
	}
	e, h, zr, ferr := f.openZip(ctx, p)
	if ferr != nil {
		return nil, ferr
	}
	defer h.Release()
	out := &ZipListing{Path: e.p, Count: len(zr.File), Entries: []ZipEntry{}}
	for _, zf := range zr.File {
		out.Bytes += zf.UncompressedSize64
		if len(out.Entries) >= limit {
			out.Truncated = true
			continue
		}
		ae := archiveEntry(zf)
		ze := ZipEntry{Name: zf.Name, Dir: ae.Dir, Size: ae.Size, Compressed: ae.Compressed, Modified: zf.Modified, Mode: zf.Mode().String()}
		if d, _ := acl.CheckUnpack([]acl.ArchiveEntry{ae}, acl.UnpackLimits{MaxRatio: DefaultArchiveLimits.MaxRatio, RatioFloor: ratioFloor}); !d.Allowed() {
			ze.Refused = d.Reason
		}
		out.Entries = append(out.Entries, ze)
	}
	return out, nil
}

// Unzipped is what unzip wrote.
type Unzipped struct {
	Path  string `json:"path"`
	Files int    `json:"files"`
	Dirs  int    `json:"dirs"`
	Bytes uint64 `json:"bytes"`
}

// Unzip unpacks archive src into directory dst (made if missing). The
// archive's central directory is read and judged first (acl.CheckUnpack:
// names that climb out, symlinks, too many entries or bytes, a ratio of
// a zip bomb, past the holder's quota), and files that exist already are
// refused, before anything is written: a refused archive leaves nothing.
// Every file is then written through the core, charged, scanned and
// admitted like any write; a failure midway takes back what was made.
func (f *FS) Unzip(ctx context.Context, src, dst string, lim ArchiveLimits) (*Unzipped, error) {
	clean, err := shedfs.CleanViewPath(dst)
	if err != nil {
		return nil, pathError(dst, err)
	}
	if ferr := f.allow(acl.AccessArchive|acl.AccessWrite, clean, acl.OpCreate, f.v.RootZone()); ferr != nil {
		return nil, ferr
	}
	e, h, zr, ferr := f.openZip(ctx, src)
	if ferr != nil {
		return nil, ferr
	}
	defer h.Release()
	// The zone unpacked into decides the quota: that of dst, or of its
	// nearest existing directory.
	zone := f.v.RootZone()
	for p := clean; ; p = path.Dir(p) {
		if p == "." {
			p = ""
		}
		if d, ferr := f.walk(p, true); ferr == nil {
			if !d.groups && !d.rec.IsDir() {
				return nil, errorf(CodeNotADirectory, d.p, "not a directory")
			}
			zone = d.at.Zone
			break
		}
		if p == "" {
			break
		}
	}
	entries := make([]acl.ArchiveEntry, len(zr.File))
	for i, zf := range zr.File {
		entries[i] = archiveEntry(zf)
	}
	ul := acl.UnpackLimits{MaxEntries: lim.MaxEntries, MaxBytes: lim.MaxBytes, MaxRatio: lim.MaxRatio, RatioFloor: ratioFloor}
	if q, err := f.v.Core().Quota(shedfs.HolderOf(zone)); err == nil {
		ul.Quota = &q
	}
	if d, bad := acl.CheckUnpack(entries, ul); !d.Allowed() {
		errno := f.v.Deny(acl.OpCreate, "/"+e.p, zone, d)
		ae := f.fail(errno, e.p)
		if bad >= 0 {
			ae.Message += ": the entry " + zr.File[bad].Name
		}
		ae.Message += "; nothing was unpacked"
		return nil, ae
	}
	// Every target is a new file in the view, inside the token's grant.
	for _, ae := range entries {
		tp, err := shedfs.CleanViewPath(path.Join(clean, ae.Name))
		if err != nil {
			return nil, errorf(CodeInvalidArgument, e.p, "the entry %s: %v; nothing was unpacked", ae.Name, err)
		}
		if ferr := f.allow(acl.AccessArchive|acl.AccessWrite, tp, acl.OpCreate, zone); ferr != nil {
			return nil, ferr
		}
		if ex, ferr := f.walk(tp, false); ferr == nil {
			if !ae.Dir || !(ex.groups || ex.rec.IsDir()) {
				return nil, errorf(CodeExists, tp, "the archive's entry %s exists already; nothing was unpacked: unzip into a new directory", ae.Name)
			}
		}
	}
	out := &Unzipped{Path: clean}
	var made []*newFile
	var dirs []string
	undo := func() {
		for i := len(made) - 1; i >= 0; i-- {
			made[i].f.v.Uncreate(made[i].dir.at, made[i].name, made[i].rec)
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			f.Delete(dirs[i], false)
		}
	}
	mkdirs := func(p string) error {
		if p == "" || p == "." {
			return nil
		}
		var missing []string
		for q := p; q != "." && q != ""; q = path.Dir(q) {
			if _, ferr := f.walk(q, true); ferr == nil {
				break
			}
			missing = append(missing, q)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			if _, err := f.Mkdir(missing[i], false); err != nil {
				return err
			}
			dirs = append(dirs, missing[i])
			out.Dirs++
		}
		return nil
	}
	for i, zf := range zr.File {
		if err := ctx.Err(); err != nil {
			undo()
			return nil, errorf(CodeInternal, e.p, "the call was cancelled; nothing was unpacked")
		}
		tp := path.Join(clean, entries[i].Name)
		if entries[i].Dir {
			if err := mkdirs(tp); err != nil {
				undo()
				return nil, err
			}
			continue
		}
		if err := mkdirs(path.Dir(tp)); err != nil {
			undo()
			return nil, err
		}
		w, ferr := f.create(tp, acl.AccessArchive|acl.AccessWrite)
		if ferr != nil {
			undo()
			return nil, ferr
		}
		rc, err := zf.Open()
		if err == nil {
			// archive/zip stops at the declared size (ErrFormat past it),
			// which CheckUnpack judged.
			_, err = io.Copy(w, rc)
			rc.Close()
		}
		if err := w.close(err); err != nil {
			undo()
			return nil, archiveError(err, tp)
		}
		made = append(made, w)
		out.Files++
		out.Bytes += zf.UncompressedSize64
	}
	return out, nil
}
