package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Every go-fuse interface each type of this package means to implement,
// checked at compile time: go-fuse finds a callback by a type assertion,
// so a signature typo would otherwise silently become ENOSYS.

// node is a stored inode as one view sees it.
var (
	_ = (fs.InodeEmbedder)((*node)(nil))
	_ = (fs.NodeLookuper)((*node)(nil))
	_ = (fs.NodeGetattrer)((*node)(nil))
	_ = (fs.NodeSetattrer)((*node)(nil))
	_ = (fs.NodeCreater)((*node)(nil))
	_ = (fs.NodeTmpfiler)((*node)(nil))
	_ = (fs.NodeOpener)((*node)(nil))
	_ = (fs.NodeMkdirer)((*node)(nil))
	_ = (fs.NodeMknoder)((*node)(nil))
	_ = (fs.NodeRmdirer)((*node)(nil))
	_ = (fs.NodeUnlinker)((*node)(nil))
	_ = (fs.NodeRenamer)((*node)(nil))
	_ = (fs.NodeLinker)((*node)(nil))
	_ = (fs.NodeSymlinker)((*node)(nil))
	_ = (fs.NodeReadlinker)((*node)(nil))
	_ = (fs.NodeOpendirHandler)((*node)(nil))
	_ = (fs.NodeStatfser)((*node)(nil))
	_ = (fs.NodeGetxattrer)((*node)(nil))
	_ = (fs.NodeSetxattrer)((*node)(nil))
	_ = (fs.NodeListxattrer)((*node)(nil))
	_ = (fs.NodeRemovexattrer)((*node)(nil))
	_ = (fs.NodeFsyncer)((*node)(nil))
)

// handle is one open(2) of a regular file; ptHandle the same with reads
// passed through to the blob.
var (
	_ = (fs.FileReader)((*handle)(nil))
	_ = (fs.FileWriter)((*handle)(nil))
	_ = (fs.FileFlusher)((*handle)(nil))
	_ = (fs.FileFsyncer)((*handle)(nil))
	_ = (fs.FileReleaser)((*handle)(nil))
	_ = (fs.FileGetattrer)((*handle)(nil))
	_ = (fs.FileAllocater)((*handle)(nil))
	_ = (fs.FileLseeker)((*handle)(nil))
	_ = (fs.FileGetlker)((*handle)(nil))
	_ = (fs.FileSetlker)((*handle)(nil))
	_ = (fs.FileSetlkwer)((*handle)(nil))
	_ = (fs.FilePassthroughFder)((*ptHandle)(nil))
)

// dirHandle is one opendir(3) of a stored directory.
var (
	_ = (fs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fs.FileReleasedirer)((*dirHandle)(nil))
	_ = (fs.FileFsyncdirer)((*dirHandle)(nil))
	_ = (fs.FileLookuper)((*dirHandle)(nil))
)

// groupsDir and trashDir are the synthetic directories of a view; every
// change in them is refused through the view's one denial path.
var (
	_ = (fs.InodeEmbedder)((*groupsDir)(nil))
	_ = (fs.NodeLookuper)((*groupsDir)(nil))
	_ = (fs.NodeGetattrer)((*groupsDir)(nil))
	_ = (fs.NodeReaddirer)((*groupsDir)(nil))
	_ = (fs.NodeStatfser)((*groupsDir)(nil))
	_ = (fs.NodeSetattrer)((*groupsDir)(nil))
	_ = (fs.NodeSetxattrer)((*groupsDir)(nil))
	_ = (fs.NodeCreater)((*groupsDir)(nil))
	_ = (fs.NodeMkdirer)((*groupsDir)(nil))
	_ = (fs.NodeMknoder)((*groupsDir)(nil))
	_ = (fs.NodeSymlinker)((*groupsDir)(nil))
	_ = (fs.NodeLinker)((*groupsDir)(nil))
	_ = (fs.NodeUnlinker)((*groupsDir)(nil))
	_ = (fs.NodeRmdirer)((*groupsDir)(nil))
	_ = (fs.NodeRenamer)((*groupsDir)(nil))

	_ = (fs.InodeEmbedder)((*trashDir)(nil))
	_ = (fs.NodeLookuper)((*trashDir)(nil))
	_ = (fs.NodeGetattrer)((*trashDir)(nil))
	_ = (fs.NodeReaddirer)((*trashDir)(nil))
	_ = (fs.NodeStatfser)((*trashDir)(nil))
	_ = (fs.NodeSetattrer)((*trashDir)(nil))
	_ = (fs.NodeSetxattrer)((*trashDir)(nil))
	_ = (fs.NodeCreater)((*trashDir)(nil))
	_ = (fs.NodeMkdirer)((*trashDir)(nil))
	_ = (fs.NodeMknoder)((*trashDir)(nil))
	_ = (fs.NodeSymlinker)((*trashDir)(nil))
	_ = (fs.NodeLinker)((*trashDir)(nil))
	_ = (fs.NodeUnlinker)((*trashDir)(nil))
	_ = (fs.NodeRmdirer)((*trashDir)(nil))
	_ = (fs.NodeRenamer)((*trashDir)(nil))

	_ = (fs.NodeCreater)(refuseCreates{})
	_ = (fs.NodeMkdirer)(refuseCreates{})
	_ = (fs.NodeMknoder)(refuseCreates{})
	_ = (fs.NodeSymlinker)(refuseCreates{})
	_ = (fs.NodeLinker)(refuseCreates{})
)

// The raw layers a view's server runs through, each wrapping go-fuse's
// node file system for the requests it must see first.
var (
	_ = (fuse.RawFileSystem)((*lockingFS)(nil))
	_ = (fuse.RawFileSystem)((*forgetCounter)(nil))
	_ = (fuse.RawFileSystem)((*setIDKillingFS)(nil))
)
