package fusefs

import "github.com/shedfs/shedfs"

// attrsUnchanged reports whether a SETATTR of mode, owner and group only
// (no times, no size) would store what rec already holds. tar, cp -a and
// npm chown and chmod every file they make to what it was created with;
// such a request is admitted as any other, then answered without a
// commit (its ctime is left as it was).
func attrsUnchanged(rec *shedfs.Inode, mode uint32, setMode bool, uid uint32, setUID bool, gid uint32, setGID bool) bool {
	return (!setMode || rec.Mode&07777 == mode&07777) &&
		(!setUID || rec.Uid == uid) &&
		(!setGID || rec.Gid == gid)
}
