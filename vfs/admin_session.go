package vfs

import (
	"errors"
	"path"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// TrashSessionClose is why the files of a closed session went to the
// trash.
const TrashSessionClose = "session-close"

// SessionOpened finishes the open of session ss, which the store just
// made (metadata.Store.OpenSession): its uploads/ID, made if missing, and
// the views told of home/sessions/ID.
func (a *Admin) SessionOpened(ss *metadata.Session) error {
	c := a.c
	u, err := c.store.GetUser(a.v.user)
	if err != nil {
		return adminErr(err, "no user named "+a.v.user)
	}
	if _, err := a.sessionDir(u, ss.ID); err != nil {
		return err
	}
	if dir, err := c.store.GetInode(ss.Placeholder); err == nil {
		a.entryChanged(dir.Parent, dir.Zone, ss.ID, nil, false)
		a.entryChanged(u.Roots.Private, dir.Zone, zones.NameSessions, nil, false)
	}
	return nil
}

// SessionClose is a close of session Session that the store has marked
// (metadata.Store.BeginSessionClose), to be carried out or finished.
type SessionClose struct {
	Session *metadata.Session
	// Keep leaves the scratch tree in home/sessions/ID; else it goes to
	// the trash.
	Keep bool
	// Closed, when set, is called once the store closed the session
	// (the daemon reloads its sessions and counts the close).
	Closed func()
	// Step, when set (tests), runs before each name of the tree goes to
	// the trash; an error stops the close there, as a crash would.
	Step func() error
}

// CloseSession does a close marked in the store, or what is left of it:
// the scratch tree into home/sessions/ID (if the session is still open),
// then, without Keep, that tree into the trash; then it drops the mark.
// Each step is resumable, so the mark makes the close complete. It
// returns where the files went (a path of the user's view, or trash).
func (a *Admin) CloseSession(sc SessionClose) (string, error) {
	c, ss := a.c, sc.Session
	_, err := c.store.CloseSession(ss.User, ss.ID, c.blobs)
	switch {
	case err == nil:
		if sc.Closed != nil {
			sc.Closed()
		}
	case !errors.Is(err, syscall.ENOENT):
		return "", adminErr(err, "close the session")
	}
	place, err := c.store.GetInode(ss.Placeholder)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return "", adminErr(err, "the closed session's directory")
	}
	if place != nil {
		a.entryChanged(place.Parent, place.Zone, ss.ID, nil, false)
	}
	// What the session removed is in the user's trash now.
	c.TrashChanged()
	kept := path.Join(zones.NameHome, zones.NameSessions, ss.ID)
	if !sc.Keep {
		kept = zones.NameTrash
		if place != nil {
			if n, err := c.store.Lookup(place.Parent, ss.ID); err == nil && n.Ino == ss.Placeholder {
				rel := path.Join(zones.NameSessions, ss.ID)
				if err := a.trashTree(place.Parent, ss.ID, rel, sc.Step); err != nil {
					return "", err
				}
				c.TrashChanged()
			}
		}
	}
	if err := c.store.EndSessionClose(ss.User, ss.ID); err != nil {
		return "", adminErr(err, "close the session")
	}
	return kept, nil
}

// trashTree moves name in directory parent, and everything below it, to
// the trash; rel is its path in the user's private zone.
func (a *Admin) trashTree(parent uint64, name, rel string, step func() error) error {
	c := a.c
	n, err := c.store.Lookup(parent, name)
	if err != nil {
		return adminErr(err, "trash "+rel)
	}
	if n.IsDir() {
		entries, err := c.store.ReadDir(n.Ino)
		if err != nil {
			return adminErr(err, "trash "+rel)
		}
		for _, e := range entries {
			if err := a.trashTree(n.Ino, e.Name, path.Join(rel, e.Name), step); err != nil {
				return err
			}
		}
	}
	if step != nil {
		if err := step(); err != nil {
			return err
		}
	}
	var note *metadata.TrashNote
	if !c.trashOff() {
		note = &metadata.TrashNote{By: a.v.user, Why: TrashSessionClose, Path: rel}
	}
	out, freed, kept, err := c.store.UnlinkTrash(parent, name, n.IsDir(), c.Unused, note)
	if err != nil {
		return adminErr(err, "move "+rel+" to the trash")
	}
	if freed && out.IsRegular() {
		c.Freed([]*shedfs.Inode{out}, FreedPurge, false)
	}
	a.entryChanged(parent, n.Zone, name, out, !kept && !freed)
	return nil
}
