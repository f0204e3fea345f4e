package vfs

import (
	"slices"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// Extended attributes of a view's entries. The user.shedfs.* names are
// computed from the inode (owner, ownership mode, zone, digest, scan
// state), never stored; setting user.shedfs.mode or .owner changes the
// entry's ownership. Other attributes are stored, charged to the entry's
// holder (shedfs.XattrCost) and capped per inode. The link attributes
// (user.shedfs.link*) make and time share-by-link links (links.go).

// Getxattr is the value of attr on at. sizeOnly says the caller asks
// only for its size (a getxattr with an empty buffer): a link made for
// it is handed out by the read that follows.
func (v *View) Getxattr(at At, attr string, sizeOnly bool) ([]byte, syscall.Errno) {
	c := v.c
	if e := v.Visible(at, acl.OpRead); e != 0 {
		return nil, e
	}
	if acl.IsLinkXattr(attr) {
		return v.linkXattr(at, attr, sizeOnly)
	}
	if s, ok, e := v.contentXattr(at, attr); ok {
		if e != 0 {
			return nil, e
		}
		return []byte(s), 0
	}
	if acl.IsShedfsXattr(attr) {
		rec, e := v.Load(at)
		if e != 0 {
			return nil, e
		}
		s, e := acl.XattrValue(acl.EntryOf(rec), attr)
		if e != 0 {
			return nil, e
		}
		return []byte(s), 0
	}
	val, err := c.store.GetXattr(at.Ino, attr)
	if err != nil {
		return nil, c.Errno("getxattr", err)
	}
	return val, 0
}

// contentXattr answers user.shedfs.sha256 (computed and waited for when
// not known yet) and user.shedfs.scan; ok is false for any other name.
func (v *View) contentXattr(at At, attr string) (_ string, ok bool, _ syscall.Errno) {
	if attr != acl.XattrSHA256 && attr != acl.XattrScan {
		return "", false, 0
	}
	c := v.c
	svc := c.content
	rec, e := v.Load(at)
	if e != 0 {
		return "", true, e
	}
	if svc == nil || !rec.IsRegular() {
		return "", true, syscall.ENODATA
	}
	if attr == acl.XattrSHA256 {
		c.Settle(at.Ino) // a digest held by a flush is stored first
		sum, err := svc.Digest(at.Ino)
		if err != nil {
			return "", true, c.Errno("digest", err)
		}
		return sum, true, 0
	}
	cont, err := svc.Content(at.Ino, at.Zone)
	if err != nil {
		return "", true, c.Errno("scan state", err)
	}
	return cont.ScanLabel(), true, 0
}

// Setxattr sets attr on at to data (flags XATTR_CREATE or
// XATTR_REPLACE). The quota is decided inside the store's transaction,
// which knows the value being replaced.
func (v *View) Setxattr(at At, attr string, data []byte, flags uint32) syscall.Errno {
	c := v.c
	if attr == acl.XattrLinkTTL {
		return v.setLinkTTL(at, string(data))
	}
	rec, e := v.Load(at)
	if e != 0 {
		return e
	}
	if e := v.RefuseKept(at, acl.OpSetattr, rec); e != 0 {
		return e
	}
	d := acl.SetXattr(v.Actor(), acl.EntryOf(rec), attr, string(data), v.memberOf(rec.Zone))
	if !d.Allowed() {
		return v.deny(XattrOp(attr), at, "", d)
	}
	if acl.IsShedfsXattr(attr) {
		return v.setOwnership(at, attr, string(data))
	}
	// Admit holds the holder's lock meanwhile (so that xattrs and open
	// files never pass the quota together) and decides the store's disk.
	h := shedfs.HolderOf(rec.Zone)
	cost := shedfs.XattrCost(attr, len(data))
	adm, d, err := c.Admit(Growth{Holder: h, Disk: cost, Hold: true, Decide: func(acl.Quota) acl.Decision { return acl.Decision{} }})
	if err != nil {
		return c.Errno("setxattr", err)
	}
	if !d.Allowed() {
		return v.deny(acl.OpSetattr, at, "", d)
	}
	for try := 0; try < 2; try++ {
		pending := c.acct.Pending(h)
		d = acl.Decision{}
		err = c.store.SetXattr(at.Ino, attr, data, int(flags), func(x metadata.XattrChange) error {
			x.Usage.Bytes += pending
			d = acl.AdmitXattr(acl.Quota{Usage: x.Usage, Limit: x.Limit}, x.Before, x.After)
			return d.Err()
		})
		if !c.makeRoom(h, cost, 0, d) {
			break
		}
	}
	adm.Done()
	if !d.Allowed() {
		return v.deny(acl.OpSetattr, at, "", d)
	}
	if err != nil {
		return c.Errno("setxattr", err)
	}
	v.changed("setxattr", at, "", 0)
	return 0
}

// XattrOp names the operation a setxattr of attr is, for the audit trail.
func XattrOp(attr string) acl.Op {
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
func (v *View) setOwnership(at At, attr, value string) syscall.Errno {
	c := v.c
	rec, err := c.store.Update(at.Ino, func(rec *shedfs.Inode) error {
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
		return c.Errno("set ownership", err)
	}
	c.Reentry(at.Ino, rec)
	v.changed(XattrOp(attr).String(), at, "", 0)
	c.fanOut(v, at.Zone, AttrOf(at.Ino))
	return 0
}

// memberOf answers who may receive ownership of an entry of zone z: the
// group's members in a group zone, any user in share.
func (v *View) memberOf(z shedfs.Zone) func(string) bool {
	return func(p string) bool {
		switch z.Kind {
		case shedfs.ZoneGroup:
			g, err := v.c.store.GetGroup(z.Principal)
			return err == nil && slices.Contains(g.Members, p)
		case shedfs.ZoneShare:
			_, err := v.c.store.GetUser(p)
			return err == nil
		}
		return false
	}
}

// Removexattr removes attr from at.
func (v *View) Removexattr(at At, attr string) syscall.Errno {
	c := v.c
	rec, e := v.Load(at)
	if e != 0 {
		return e
	}
	if e := v.RefuseKept(at, acl.OpSetattr, rec); e != 0 {
		return e
	}
	if d := acl.RemoveXattr(v.Actor(), acl.EntryOf(rec), attr); !d.Allowed() {
		return v.deny(acl.OpSetattr, at, "", d)
	}
	if err := c.store.RemoveXattr(at.Ino, attr); err != nil {
		return c.Errno("removexattr", err)
	}
	v.changed("removexattr", at, "", 0)
	return 0
}

// Listxattr lists at's stored attributes. The computed user.shedfs.*
// attributes are not listed, so that cp -a and rsync -X do not try to
// copy them onto new files.
func (v *View) Listxattr(at At) ([]string, syscall.Errno) {
	if e := v.Visible(at, acl.OpRead); e != 0 {
		return nil, e
	}
	names, err := v.c.store.ListXattr(at.Ino)
	if err != nil {
		return nil, v.c.Errno("listxattr", err)
	}
	return names, 0
}
