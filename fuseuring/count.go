package fuseuring

// Generated from go-fuse v2.12.1's fuse.RawFileSystem (one method each,
// all alike): counting passes every call on and counts the requests that
// did not come over a ring, i.e. over /dev/fuse.

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// counting counts, for Options.Dev, the requests a file system gets over
// /dev/fuse: every call whose request is not one a ring is serving
// (onRing holds their unique ids while they are served). FORGETs always
// come over /dev/fuse; a BATCH_FORGET counts once per node.
type counting struct {
	fuse.RawFileSystem
	onRing *sync.Map
	dev    func()
}

func (c *counting) count(h *fuse.InHeader) {
	if h != nil {
		if _, ok := c.onRing.Load(h.Unique); ok {
			return
		}
	}
	c.dev()
}

func (c *counting) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) (status fuse.Status) {
	c.count(header)
	return c.RawFileSystem.Lookup(cancel, header, name, out)
}

func (c *counting) Forget(nodeid, nlookup uint64) {
	c.count(nil)
	c.RawFileSystem.Forget(nodeid, nlookup)
}

func (c *counting) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.GetAttr(cancel, input, out)
}

func (c *counting) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.SetAttr(cancel, input, out)
}

func (c *counting) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Mknod(cancel, input, name, out)
}

func (c *counting) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Mkdir(cancel, input, name, out)
}

func (c *counting) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) (code fuse.Status) {
	c.count(header)
	return c.RawFileSystem.Unlink(cancel, header, name)
}

func (c *counting) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) (code fuse.Status) {
	c.count(header)
	return c.RawFileSystem.Rmdir(cancel, header, name)
}

func (c *counting) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Rename(cancel, input, oldName, newName)
}

func (c *counting) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Link(cancel, input, filename, out)
}

func (c *counting) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) (code fuse.Status) {
	c.count(header)
	return c.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
}

func (c *counting) Readlink(cancel <-chan struct{}, header *fuse.InHeader) (out []byte, code fuse.Status) {
	c.count(header)
	return c.RawFileSystem.Readlink(cancel, header)
}

func (c *counting) Access(cancel <-chan struct{}, input *fuse.AccessIn) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Access(cancel, input)
}

func (c *counting) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (sz uint32, code fuse.Status) {
	c.count(header)
	return c.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (c *counting) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	c.count(header)
	return c.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (c *counting) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	c.count(&input.InHeader)
	return c.RawFileSystem.SetXAttr(cancel, input, attr, data)
}

func (c *counting) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) (code fuse.Status) {
	c.count(header)
	return c.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (c *counting) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Create(cancel, input, name, out)
}

func (c *counting) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Tmpfile(cancel, input, out)
}

func (c *counting) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) (status fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Open(cancel, input, out)
}

func (c *counting) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Read(cancel, input, buf)
}

func (c *counting) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	c.count(&in.InHeader)
	return c.RawFileSystem.Lseek(cancel, in, out)
}

func (c *counting) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.GetLk(cancel, input, out)
}

func (c *counting) SetLk(cancel <-chan struct{}, input *fuse.LkIn) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.SetLk(cancel, input)
}

func (c *counting) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.SetLkw(cancel, input)
}

func (c *counting) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	c.count(&input.InHeader)
	c.RawFileSystem.Release(cancel, input)
}

func (c *counting) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (written uint32, code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Write(cancel, input, data)
}

func (c *counting) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (written uint32, code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Writev(cancel, input, data)
}

func (c *counting) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (written uint32, code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.CopyFileRange(cancel, input)
}

func (c *counting) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
}

func (c *counting) Flush(cancel <-chan struct{}, input *fuse.FlushIn) fuse.Status {
	c.count(&input.InHeader)
	return c.RawFileSystem.Flush(cancel, input)
}

func (c *counting) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Fsync(cancel, input)
}

func (c *counting) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Fallocate(cancel, input)
}

func (c *counting) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) (status fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.OpenDir(cancel, input, out)
}

func (c *counting) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.count(&input.InHeader)
	return c.RawFileSystem.ReadDir(cancel, input, out)
}

func (c *counting) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.count(&input.InHeader)
	return c.RawFileSystem.ReadDirPlus(cancel, input, out)
}

func (c *counting) ReleaseDir(input *fuse.ReleaseIn) {
	c.count(&input.InHeader)
	c.RawFileSystem.ReleaseDir(input)
}

func (c *counting) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.FsyncDir(cancel, input)
}

func (c *counting) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) (code fuse.Status) {
	c.count(input)
	return c.RawFileSystem.StatFs(cancel, input, out)
}

func (c *counting) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) (code fuse.Status) {
	c.count(&input.InHeader)
	return c.RawFileSystem.Statx(cancel, input, out)
}

// CountDev wraps fs so that dev is called once for every request it gets:
// the count of a mount served over /dev/fuse only.
func CountDev(fs fuse.RawFileSystem, dev func()) fuse.RawFileSystem {
	return &counting{RawFileSystem: fs, onRing: &sync.Map{}, dev: dev}
}
