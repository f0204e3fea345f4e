package vfs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// DoorAdmin is the door of the admin API (and of the command line when no
// daemon runs).
const DoorAdmin = "admin"

// Admin is the admin door acting for one user: the operations an operator
// runs on a user's world (imports, trash restores, restores to a time,
// session closes). No rule of the user's applies to them (the admin puts
// files into uploads/, which the user's views only read, and restores
// what the user could not), so they are the core's and not a View's; but
// every growth still goes through Admit or InTxn, every change is
// recorded with the door "admin", and it reaches every view's kernel
// through the same fan-out as a view's own operation (Frontend.Changed,
// from a view with no kernel of its own).
type Admin struct {
	c *Core
	// v is the admin's view of the user, the "from" of the fan-out; it
	// has no kernel, so every view holding what changed is told.
	v *View
}

// Admin returns the admin door acting for user. It reads nothing: the
// operations check the user themselves.
func (c *Core) Admin(user string) *Admin {
	return &Admin{c: c, v: &View{c: c, door: DoorAdmin, user: user}}
}

// User is the user the admin acts for.
func (a *Admin) User() string { return a.v.user }

// AdminError is the failure of an admin operation with the one line the
// operator reads: Err is the cause (an errno for a refusal: EEXIST,
// EDQUOT, EFBIG, ENOSPC, EBUSY, EINVAL, ENOENT), Msg says what failed.
// The admin API turns the errno into its error code.
type AdminError struct {
	Err error
	Msg string
}

func (e *AdminError) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

func (e *AdminError) Unwrap() error { return e.Err }

// adminErrorf is a refusal for errno with its line.
func adminErrorf(errno syscall.Errno, format string, args ...any) *AdminError {
	return &AdminError{Err: errno, Msg: fmt.Sprintf(format, args...)}
}

// adminErr is err of the store or the disk, with what failed; nil stays
// nil, and an AdminError already said is kept.
func adminErr(err error, what string) error {
	var ae *AdminError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	}
	return &AdminError{Err: err, Msg: what}
}

// Record puts a change the admin made into the audit trail, with the door
// "admin": through the core's recorder when one runs, so the trail keeps
// one order, else straight into the store (the command line without a
// daemon).
func (a *Admin) Record(z shedfs.Zone, path, op string, bytes int64) {
	c := a.c
	e := shedfs.Event{Time: time.Now(), User: a.v.user, Zone: z, Path: path, Op: op, Bytes: bytes, Door: DoorAdmin}
	if c.Recording() {
		c.Record(e)
		return
	}
	rec := metadata.AuditRecord{Time: e.Time, User: e.User, View: e.User, Zone: z.String(), Path: path, Op: op,
		Result: metadata.ResultOK, Bytes: bytes, Door: DoorAdmin}
	if err := c.store.AppendAudit([]metadata.AuditRecord{rec}); err != nil {
		c.log.Warn("audit record of an admin change not written", "op", op, "err", err)
	}
}

// entryChanged tells every view's kernel that name in dir (of zone z)
// changed: the Changed a view's operation sends, from the admin's view.
// No kernel saw the change, so the content versions of dir (and of was,
// the inode the name stood for, if any) move. reclaim says was lost its
// last link and nothing keeps it: it goes once nothing holds it.
func (a *Admin) entryChanged(dir uint64, z shedfs.Zone, name string, was *shedfs.Inode, reclaim bool) {
	c := a.c
	c.versions.bump(dir)
	wasIno := NoneBefore
	items := []Change{NameWas(dir, name, NoneBefore), DirOf(dir)}
	if was != nil {
		wasIno = was.Ino
		c.versions.bump(was.Ino)
		items = append(items, DataOf(was.Ino, 0, 0))
	}
	items[0].Was = wasIno
	c.fanOut(a.v, z, items...)
	switch {
	case !reclaim || was == nil || was.Nlink > 0:
	case len(c.attached()) == 0:
		// Nothing can hold it: it goes now, with its blob.
		c.reclaim(was.Ino)
	default:
		c.ReclaimIfUnused(was)
	}
}

// inodeChanged tells every view's kernel and the open-file table that
// ino's attributes changed (a new link).
func (a *Admin) inodeChanged(ino uint64, z shedfs.Zone) {
	c := a.c
	if rec, err := c.store.GetInode(ino); err == nil {
		c.Reentry(ino, rec)
	}
	c.fanOut(a.v, z, AttrOf(ino))
}

// trashOff reports whether the store's trash is off now.
func (c *Core) trashOff() bool {
	st, err := c.store.GetSettings()
	return err == nil && st.TrashRetention() == 0
}

// maxFileSizeNow is the store's max file size as stored now (0: no limit
// but the format's).
func (c *Core) maxFileSizeNow() uint64 {
	st, err := c.store.GetSettings()
	if err != nil {
		c.log.Error("read store settings", "err", err)
		return 0
	}
	return st.MaxFileSize
}

// Resolve finds path, from the root of the user's main view, in the
// store, and returns its record and the path cleaned ("." for the root).
// The admin sees what the user's view shows (a group only when the user
// is in it) and no "..".
func (a *Admin) Resolve(p string) (*shedfs.Inode, string, error) {
	c, user := a.c, a.v.user
	var parts []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return nil, "", adminErrorf(syscall.EINVAL, "path %q: \"..\" is not allowed; give the path from the view root", p)
		}
		if len(s) > shedfs.MaxNameLen {
			return nil, "", adminErrorf(syscall.EINVAL, "path %q: a name is longer than %d bytes", p, shedfs.MaxNameLen)
		}
		parts = append(parts, s)
	}
	rel := strings.Join(parts, "/")
	if rel == "" {
		rel = "."
	}
	u, err := c.store.GetUser(user)
	if err != nil {
		return nil, "", adminErr(err, fmt.Sprintf("no user named %s", user))
	}
	notFound := adminErrorf(syscall.ENOENT, "no %s in the view of %s", rel, user)
	ino := u.Roots.Private
	i := 0
	if len(parts) > 0 {
		switch parts[0] {
		case zones.NameOutput:
			ino, i = u.Roots.Output, 1
		case zones.NameUploads:
			ino, i = u.Roots.Uploads, 1
		case zones.NameShare:
			ino, i = c.store.ShareRoot(), 1
		case zones.NameGroups:
			if len(parts) == 1 {
				return nil, "", adminErrorf(syscall.EINVAL, "groups/ itself has no owner or mode; name a group in it")
			}
			groups, err := c.store.GroupsOf(user)
			if err != nil {
				return nil, "", adminErr(err, fmt.Sprintf("groups of %s", user))
			}
			if !slices.Contains(groups, parts[1]) {
				return nil, "", notFound
			}
			g, err := c.store.GetGroup(parts[1])
			if err != nil {
				return nil, "", adminErr(err, fmt.Sprintf("no group named %s", parts[1]))
			}
			ino, i = g.Root, 2
		}
	}
	n, err := c.store.GetInode(ino)
	if err != nil {
		return nil, "", adminErr(err, fmt.Sprintf("zone root of %s", rel))
	}
	for _, name := range parts[i:] {
		n, err = c.store.Lookup(n.Ino, name)
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return nil, "", notFound
		}
		if err != nil {
			return nil, "", adminErr(err, fmt.Sprintf("look up %s in the view of %s", rel, user))
		}
	}
	return n, rel, nil
}
