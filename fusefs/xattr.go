package fusefs

import (
	"context"
	"slices"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// Getxattr implements fs.NodeGetxattrer. The user.shedfs.* names are
// computed from the inode (owner, ownership mode, zone), never stored.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.v.fs.track("getxattr", n.zone, time.Now(), &errno)
	if !acl.IsShedfsXattr(attr) && !acl.XattrNamespace(attr).Allowed() {
		// security.* and system.* are never stored (see Setxattr): the
		// kernel asks for security.capability on every write, and the
		// answer, the same for every inode, needs no lookup and is no
		// read worth a denial.
		return 0, syscall.ENODATA
	}
	if e := n.visible(acl.OpRead); e != 0 {
		return 0, e
	}
	if acl.IsLinkXattr(attr) {
		return n.getLinkXattr(attr, dest)
	}
	var val []byte
	if s, ok, e := n.contentXattr(attr); ok {
		if e != 0 {
			return 0, e
		}
		val = []byte(s)
	} else if acl.IsShedfsXattr(attr) {
		rec, e := n.load()
		if e != 0 {
			return 0, e
		}
		s, e := acl.XattrValue(acl.EntryOf(rec), attr)
		if e != 0 {
			return 0, e
		}
		val = []byte(s)
	} else {
		v, err := n.v.fs.store.GetXattr(n.ino, attr)
		if err != nil {
			return 0, n.v.fs.errno("getxattr", err)
		}
		val = v
	}
	if len(dest) == 0 {
		return uint32(len(val)), 0
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

// Setxattr implements fs.NodeSetxattrer. Setting user.shedfs.mode or
// user.shedfs.owner changes the entry's ownership, as acl allows. Other
// attributes are charged to the entry's holder (shedfs.XattrCost) and
// capped per inode, as acl.AdmitXattr decides inside the store's
// transaction.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) (errno syscall.Errno) {
	defer n.v.fs.track("setxattr", n.zone, time.Now(), &errno)
	f := n.v.fs
	if attr == acl.XattrLinkTTL {
		return n.setLinkTTL(string(data))
	}
	rec, e := n.load()
	if e != 0 {
		return e
	}
	if e := n.v.vv.RefuseKept(n.at(), acl.OpSetattr, rec); e != 0 {
		return e
	}
	d := acl.SetXattr(n.v.actor(), acl.EntryOf(rec), attr, string(data), n.v.memberOf(rec.Zone))
	if !d.Allowed() {
		return n.deny(xattrOp(attr), "", d)
	}
	if acl.IsShedfsXattr(attr) {
		return n.setOwnership(attr, string(data))
	}
	// The quota is decided inside the store's transaction, which knows
	// the value being replaced; Admit holds the holder's lock meanwhile
	// (so that xattrs and open files never pass the quota together) and
	// decides the store's disk.
	h := shedfs.HolderOf(rec.Zone)
	cost := shedfs.XattrCost(attr, len(data))
	adm, d, err := f.core.Admit(vfs.Growth{Holder: h, Disk: cost, Hold: true, Decide: func(acl.Quota) acl.Decision { return acl.Decision{} }})
	if err != nil {
		return f.errno("setxattr", err)
	}
	if !d.Allowed() {
		return n.deny(acl.OpSetattr, "", d)
	}
	for try := 0; try < 2; try++ {
		pending := f.acct.Pending(h)
		d = acl.Decision{}
		err = f.store.SetXattr(n.ino, attr, data, int(flags), func(c metadata.XattrChange) error {
			c.Usage.Bytes += pending
			d = acl.AdmitXattr(acl.Quota{Usage: c.Usage, Limit: c.Limit}, c.Before, c.After)
			return d.Err()
		})
		if !f.core.MakeRoom(h, cost, 0, d) {
			break
		}
	}
	adm.Done()
	if !d.Allowed() {
		return n.deny(acl.OpSetattr, "", d)
	}
	if err != nil {
		return f.errno("setxattr", err)
	}
	n.changed("setxattr", "", 0)
	return 0
}

// xattrOp names the operation a setxattr of attr is, for the audit trail.
func xattrOp(attr string) acl.Op {
	switch attr {
	case acl.XattrMode:
		return acl.OpSetMode
	case acl.XattrOwner:
		return acl.OpSetOwner
	case acl.XattrZone:
		return acl.OpSetZoneXattr
	}
	return acl.OpSetattr
}

// setOwnership applies an admitted change of user.shedfs.mode or .owner.
func (n *node) setOwnership(attr, value string) syscall.Errno {
	f := n.v.fs
	rec, err := f.store.Update(n.ino, func(rec *shedfs.Inode) error {
		switch attr {
		case acl.XattrMode:
			m, err := shedfs.ParseOwnMode(value)
			if err != nil {
				return err
			}
			rec.OwnMode = m
		case acl.XattrOwner:
			rec.Owner = value
		}
		return nil
	}, nil)
	if err != nil {
		return f.errno("set ownership", err)
	}
	f.core.Reentry(n.ino, rec)
	n.changed(xattrOp(attr).String(), "", 0)
	f.invalidate(n.v, n.zone, attrOf(n.ino))
	return 0
}

// memberOf answers who may receive ownership of an entry of zone z: the
// group's members in a group zone, any user in share.
func (v *View) memberOf(z shedfs.Zone) func(string) bool {
	return func(p string) bool {
		switch z.Kind {
		case shedfs.ZoneGroup:
			g, err := v.fs.store.GetGroup(z.Principal)
			return err == nil && slices.Contains(g.Members, p)
		case shedfs.ZoneShare:
			_, err := v.fs.store.GetUser(p)
			return err == nil
		}
		return false
	}
}

// Removexattr implements fs.NodeRemovexattrer.
func (n *node) Removexattr(ctx context.Context, attr string) (errno syscall.Errno) {
	defer n.v.fs.track("removexattr", n.zone, time.Now(), &errno)
	rec, e := n.load()
	if e != 0 {
		return e
	}
	if e := n.v.vv.RefuseKept(n.at(), acl.OpSetattr, rec); e != 0 {
		return e
	}
	if d := acl.RemoveXattr(n.v.actor(), acl.EntryOf(rec), attr); !d.Allowed() {
		return n.deny(acl.OpSetattr, "", d)
	}
	if err := n.v.fs.store.RemoveXattr(n.ino, attr); err != nil {
		return n.v.fs.errno("removexattr", err)
	}
	n.changed("removexattr", "", 0)
	return 0
}

// Listxattr implements fs.NodeListxattrer. The computed user.shedfs.*
// attributes are not listed, so that cp -a and rsync -X do not try to copy
// them onto new files.
func (n *node) Listxattr(ctx context.Context, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.v.fs.track("listxattr", n.zone, time.Now(), &errno)
	if e := n.visible(acl.OpRead); e != 0 {
		return 0, e
	}
	names, err := n.v.fs.store.ListXattr(n.ino)
	if err != nil {
		return 0, n.v.fs.errno("listxattr", err)
	}
	size := 0
	for _, name := range names {
		size += len(name) + 1
	}
	if len(dest) == 0 {
		return uint32(size), 0
	}
	if len(dest) < size {
		return uint32(size), syscall.ERANGE
	}
	off := 0
	for _, name := range names {
		off += copy(dest[off:], name)
		dest[off] = 0
		off++
	}
	return uint32(size), 0
}
