package fusefs

import (
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// This file is the glue between the callbacks and the rules: it gathers
// what acl needs (the actor, entries, quotas), and turns a denial into an
// errno, a log line and an event. The rules themselves live in acl and
// zones only.

// actor is the view's principal with its current groups.
func (v *View) actor() acl.Actor {
	v.mu.Lock()
	defer v.mu.Unlock()
	return acl.Actor{User: v.user, Groups: v.groupList, Session: v.session}
}

// loadGroups refreshes the cached group list of the view's user.
func (v *View) loadGroups() error {
	groups, err := v.fs.store.GroupsOf(v.user)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.groupList = groups
	v.mu.Unlock()
	return nil
}

// inGroup reports whether the view's user is in group g now.
func (v *View) inGroup(g string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Contains(v.groupList, g)
}

// pathOf names n (and name inside it, when given) as the view shows it.
func (n *node) pathOf(name string) string {
	p := "/" + n.Path(nil)
	if name != "" {
		p = path.Join(p, name)
	}
	return p
}

// deny records a denial of op on name in n (or on n itself) and returns
// its errno.
func (n *node) deny(op acl.Op, name string, d acl.Decision) syscall.Errno {
	return n.v.deny(op, n.pathOf(name), n.zone, d)
}

// deny records a denial and returns its errno.
func (v *View) deny(op acl.Op, p string, z shedfs.Zone, d acl.Decision) syscall.Errno {
	return v.denyDetail(op, p, z, d, "")
}

// denyDetail is deny of an open refused by the content's scan state. An
// Unsupported decision (acl.Decision.Refused is false) is answered but
// neither counted nor recorded: it is no refusal of a rule.
func (v *View) denyDetail(op acl.Op, p string, z shedfs.Zone, d acl.Decision, scan string) syscall.Errno {
	if !d.Refused() {
		v.fs.log.Debug("unsupported", "user", v.user, "op", op.String(), "path", p, "reason", d.Reason, "errno", d.Errno)
		return d.Errno
	}
	v.fs.countDenial(d.Reason)
	v.fs.record(shedfs.Event{
		Time:   time.Now(),
		User:   v.user,
		Zone:   z,
		Path:   p,
		Op:     op.String(),
		Errno:  d.Errno,
		Reason: d.Reason,
		Scan:   scan,

		Session: v.session,
	})
	v.fs.log.Debug("denied", "user", v.user, "op", op.String(), "path", p, "reason", d.Reason, "errno", d.Errno)
	return d.Errno
}

// changed records a change that happened to name in n (or to n).
func (n *node) changed(op string, name string, bytes int64) {
	if !n.v.fs.core.Recording() {
		return
	}
	n.changedPath(op, n.pathOf(name), bytes)
}

// changedPath records a change at path p in n's zone.
func (n *node) changedPath(op string, p string, bytes int64) {
	n.v.fs.record(shedfs.Event{
		Time:  time.Now(),
		User:  n.v.user,
		Zone:  n.zone,
		Path:  p,
		Op:    op,
		Bytes: bytes,

		Session: n.v.session,
	})
}

func (f *FS) record(e shedfs.Event) { f.core.Record(e) }

// quota gathers what acl needs to admit a charge to the holder of zone z
// (vfs.Core.Quota), for what a view shows (df).
func (f *FS) quota(z shedfs.Zone) (acl.Quota, error) {
	return f.core.Quota(shedfs.HolderOf(z))
}

// entryBytes is what a new entry is taken to grow the store by on disk:
// its metadata and, for a file, its blob's inode and shard.
const entryBytes = shedfs.ChargeUnit
