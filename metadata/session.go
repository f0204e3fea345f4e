package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// pSession is the prefix of session records: 'W' user 0x00 id, the
// Session as JSON (docs/design.md, "Sessions").
const pSession = 'W'

// Session is shedfs.Session.
type Session = shedfs.Session

// ZoneSession is shedfs.ZoneSession.
const ZoneSession = shedfs.ZoneSession

func sessionPrefix(user string) []byte {
	k := strKey(pSession, user)
	return append(k, 0)
}

func sessionKey(user, id string) []byte { return append(sessionPrefix(user), id...) }

// OpenSession creates session id of user: its scratch root (zone
// session:user/id, charged to the session and to the user), its limit,
// the directory sessions/ of the user's private tree if missing, and the
// placeholder sessions/id in it, in one transaction. The id follows the
// principal-name rules (EINVAL); EEXIST when the session is open or the
// user's private tree has a sessions/id already (a kept session), so
// that an id names one thing in that directory; ENOENT for an unknown
// user.
func (s *Store) OpenSession(user, id string, expires time.Time, limit shedfs.Limit) (*Session, error) {
	return s.OpenSessionAs(Session{User: user, ID: id, Expires: expires}, limit)
}

// OpenSessionAs is OpenSession of tmpl's user, id and expiry, keeping
// what its scratch starts as (From, Fork, Start) and its checkpoints.
func (s *Store) OpenSessionAs(tmpl Session, limit shedfs.Limit) (*Session, error) {
	user, id, expires := tmpl.User, tmpl.ID, tmpl.Expires
	if err := ValidPrincipal(id); err != nil {
		return nil, fmt.Errorf("session id: %w", err)
	}
	var inos [3]uint64
	for i := range inos {
		var err error
		if inos[i], err = s.allocIno(); err != nil {
			return nil, err
		}
	}
	var out *Session
	err := s.update(func(o *op) error {
		u := &shedfs.User{}
		if err := getJSON(o.tx, userKey(user), "user "+user, u); err != nil {
			return err
		}
		if _, err := o.tx.Get(sessionKey(user, id)); err == nil {
			return fmt.Errorf("session %s of %s: %w", id, user, syscall.EEXIST)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		dir, err := o.sessionsDir(u, inos[0])
		if err != nil {
			return err
		}
		if _, _, err := o.entry(dir.Ino, id); err == nil {
			return fmt.Errorf("%s/%s in the private tree of %s: %w", shedfs.SessionsDir, id, user, syscall.EEXIST)
		} else if !errors.Is(err, syscall.ENOENT) {
			return err
		}
		place, err := o.mkdir(dir, id, inos[1], user)
		if err != nil {
			return err
		}
		if err := o.charge(shedfs.UserHolder(user), 0, 1); err != nil {
			return err
		}
		z := shedfs.SessionZone(user, id)
		o.put(newRoot(inos[2], z, user, shedfs.OwnModeNone, o.now))
		h := shedfs.HolderOf(z)
		if err := o.charge(h, 0, 1); err != nil {
			return err
		}
		if limit != (shedfs.Limit{}) {
			if err := o.tx.Set(limitKey(h), encodePair(limit.Bytes, limit.Inodes)); err != nil {
				return err
			}
		}
		if err := o.setBirth(inos[2], o.now); err != nil {
			return err
		}
		out = &Session{User: user, ID: id, Root: inos[2], Placeholder: place.Ino, Created: o.now, Expires: expires, From: tmpl.From, Fork: tmpl.Fork, Base: tmpl.Base, Start: tmpl.Start,
			CheckpointEvery: tmpl.CheckpointEvery, CheckpointKeep: tmpl.CheckpointKeep}
		return setJSON(o.tx, sessionKey(user, id), out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sessionsDir returns the directory sessions/ of u's private tree, made
// (as inode ino, charged to u) when missing; ENOTDIR when the name is
// something else.
func (o *op) sessionsDir(u *shedfs.User, ino uint64) (*shedfs.Inode, error) {
	child, _, err := o.entry(u.Roots.Private, shedfs.SessionsDir)
	if err == nil {
		return o.dir(child)
	}
	if !errors.Is(err, syscall.ENOENT) {
		return nil, err
	}
	root, err := o.dir(u.Roots.Private)
	if err != nil {
		return nil, err
	}
	d, err := o.mkdir(root, shedfs.SessionsDir, ino, u.Name)
	if err != nil {
		return nil, err
	}
	return d, o.charge(shedfs.UserHolder(u.Name), 0, 1)
}

// mkdir makes directory name in p (of p's zone, mode 0755) as inode ino,
// without charging it.
func (o *op) mkdir(p *shedfs.Inode, name string, ino uint64, owner string) (*shedfs.Inode, error) {
	n := &shedfs.Inode{
		Ino: ino, Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Parent: p.Ino,
		Atime: o.now, Mtime: o.now, Ctime: o.now, Zone: p.Zone, Owner: owner,
	}
	p.Nlink++
	o.touchDir(p)
	o.put(n)
	if err := o.setBirth(ino, o.now); err != nil {
		return nil, fmt.Errorf("birth of %s: %w", name, err)
	}
	if err := o.setEntry(p.Ino, name, n); err != nil {
		return nil, fmt.Errorf("entry %s: %w", name, err)
	}
	return n, nil
}

// GetSession returns session id of user, ENOENT if none is open.
func (s *Store) GetSession(user, id string) (*Session, error) {
	ss := &Session{}
	err := s.kv.View(func(tx Txn) error {
		return getJSON(tx, sessionKey(user, id), "session "+user+"/"+id, ss)
	})
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// ListSessions returns the open sessions of user (of every user for ""),
// by user and id.
func (s *Store) ListSessions(user string) ([]Session, error) {
	prefix := []byte{pSession}
	if user != "" {
		prefix = sessionPrefix(user)
	}
	var out []Session
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan(prefix, nil, func(k, v []byte) error {
			var ss Session
			if err := json.Unmarshal(v, &ss); err != nil {
				return fmt.Errorf("decode session %q: %w: %v", k[1:], ErrCorrupt, err)
			}
			out = append(out, ss)
			return nil
		})
	})
	return out, err
}

// pSessionClose is the prefix of the marks of closes under way: 'w'
// user 0x00 id, the SessionClose as JSON.
const pSessionClose = 'w'

func sessionCloseKey(user, id string) []byte {
	return append(append(strKey(pSessionClose, user), 0), id...)
}

// SessionClose marks a close under way, from before it changes anything
// (the view unmounted aside) until its last step (the scratch tree moved
// to the trash, without Keep) is done, so that a daemon that dies in
// between finishes it at its next start: a close is a step that
// completes, never half done.
type SessionClose struct {
	Session Session `json:"session"`
	Keep    bool    `json:"keep,omitempty"`
}

// BeginSessionClose marks the close of open session ss as under way;
// ENOENT when it is not open.
func (s *Store) BeginSessionClose(ss *Session, keep bool) error {
	return s.update(func(o *op) error {
		if _, err := o.tx.Get(sessionKey(ss.User, ss.ID)); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("session %s of %s: %w", ss.ID, ss.User, syscall.ENOENT)
		} else if err != nil {
			return err
		}
		return setJSON(o.tx, sessionCloseKey(ss.User, ss.ID), SessionClose{Session: *ss, Keep: keep})
	})
}

// EndSessionClose drops the mark of a close that is done.
func (s *Store) EndSessionClose(user, id string) error {
	return s.update(func(o *op) error { return o.tx.Delete(sessionCloseKey(user, id)) })
}

// SessionCloses lists the closes under way of user (of every user for
// ""), by user and id.
func (s *Store) SessionCloses(user string) ([]SessionClose, error) {
	prefix := []byte{pSessionClose}
	if user != "" {
		prefix = append(strKey(pSessionClose, user), 0)
	}
	var out []SessionClose
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan(prefix, nil, func(k, v []byte) error {
			var c SessionClose
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("decode session close %q: %w: %v", k[1:], ErrCorrupt, err)
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// SessionBlobs is what closing a session does to blobs: link gives the
// content of one inode number to another as well (no copy), remove drops
// a number's blob.
type SessionBlobs interface {
	Link(from, to uint64) error
	Remove(ino uint64) error
}

// CloseSession ends session id of user. The scratch tree becomes part of
// the user's private tree in the placeholder sessions/id: every inode
// below the scratch root gets a new number of the private zone (its blob
// linked to the new number first, no data copied; xattrs, content
// records and birth go with it), in one transaction that also removes the
// scratch root, the session's own usage and limit, and the record; the
// user's usage keeps the files, which it was charged already. Inode
// numbers change, so no view can hold a node whose zone changed. The
// session's own trash moves into the user's first (moveSessionTrash).
// A tree too big for one
// transaction (etcd's --max-txn-ops) is closed in steps (closeInSteps).
// It returns the session as it was.
func (s *Store) CloseSession(user, id string, b SessionBlobs) (*Session, error) {
	ss, err := s.GetSession(user, id)
	if err != nil {
		return nil, err
	}
	if err := s.moveSessionTrash(ss, b); err != nil {
		return nil, fmt.Errorf("close session %s of %s: %w", id, user, err)
	}
	tree, err := s.subtree(ss.Root)
	if err != nil {
		return nil, err
	}
	moved := make(map[uint64]uint64, len(tree))
	var linked []uint64
	undo := func() {
		for _, ino := range linked {
			_ = b.Remove(ino)
		}
	}
	for _, n := range tree {
		ino, err := s.allocIno()
		if err != nil {
			undo()
			return nil, err
		}
		moved[n.Ino] = ino
		if n.IsRegular() {
			if err := b.Link(n.Ino, ino); err != nil {
				undo()
				return nil, fmt.Errorf("close session %s of %s: %w", id, user, err)
			}
			linked = append(linked, ino)
		}
	}
	moved[ss.Root] = ss.Placeholder
	err = errTooBigForTest
	if s.closeSteps == 0 {
		err = s.update(func(o *op) error {
			return o.closeSession(ss, moved)
		})
	}
	if err != nil && isTxnTooBig(err) {
		err = s.closeInSteps(ss, tree, moved)
	}
	if err != nil {
		if !errors.Is(err, errCloseStopped) {
			undo()
		}
		return nil, fmt.Errorf("close session %s of %s: %w", id, user, err)
	}
	for _, n := range tree {
		if n.IsRegular() {
			_ = b.Remove(n.Ino)
		}
	}
	return ss, nil
}

// closeBatch is how many inodes one step of closeInSteps renumbers or
// deletes; a step that is still too big is halved.
const closeBatch = 256

// errTooBigForTest stands for a too-big transaction when a test sets
// Store.closeSteps; errCloseStopped is what a test's closeStop hook ends
// a close with, as a crash would (nothing undone).
var (
	errTooBigForTest = fmt.Errorf("close in steps for a test: %w", errEtcdTooBig)
	errCloseStopped  = errors.New("close stopped by a test")
)

// closeInSteps is CloseSession for a tree too big for one transaction, in
// steps each of which leaves the store consistent if the daemon dies
// after it: (1) the renumbered records are written in batches, unreachable
// (no entry names them yet), so a crash leaves inodes fsck reclaims and
// the session intact; (2) one small transaction (linkSession) gives the
// placeholder the scratch root's entries and removes the root, the
// session's usage, limit and record, as closeSession does; (3) the old
// records, unreachable from then on, are deleted in batches (a crash
// leaves them to fsck). Usage never changes in steps 1 and 3 (no record
// of either is reachable), so it stays exact. The scratch root's entries
// and each directory's entries must still fit one transaction.
func (s *Store) closeInSteps(ss *Session, tree []*shedfs.Inode, moved map[uint64]uint64) error {
	s.log.Info("close session in steps: its tree is too big for one transaction",
		"user", ss.User, "session", ss.ID, "inodes", len(tree))
	err := s.inBatches(tree, func(o *op, n *shedfs.Inode) error {
		_, err := o.copyInode(ss, n.Ino, moved)
		return err
	})
	if err == nil && s.closeStop != nil {
		if err := s.closeStop(); err != nil {
			return err
		}
	}
	if err == nil {
		err = s.update(func(o *op) error { return o.linkSession(ss, moved) })
	}
	if err != nil {
		s.dropCopies(tree, moved)
		return fmt.Errorf("renumber the tree: %w", err)
	}
	if err := s.inBatches(tree, func(o *op, n *shedfs.Inode) error {
		_, err := o.deleteInode(n)
		return err
	}); err != nil {
		// The session is closed; what is left is unreachable.
		s.log.Warn("close session: old records of the scratch tree left for fsck to reclaim",
			"user", ss.User, "session", ss.ID, "err", err)
	}
	return nil
}

// dropCopies deletes the renumbered records a failed closeInSteps wrote
// (unreachable; what this misses, fsck reclaims).
func (s *Store) dropCopies(tree []*shedfs.Inode, moved map[uint64]uint64) {
	err := s.inBatches(tree, func(o *op, n *shedfs.Inode) error {
		cp := *n
		cp.Ino = moved[n.Ino]
		_, err := o.deleteInode(&cp)
		return err
	})
	if err != nil {
		s.log.Warn("close session: renumbered records left for fsck to reclaim", "err", err)
	}
}

// inBatches runs fn on every inode of list, closeBatch (or closeSteps)
// inodes a transaction, halving a batch that is too big.
func (s *Store) inBatches(list []*shedfs.Inode, fn func(o *op, n *shedfs.Inode) error) error {
	size := closeBatch
	if s.closeSteps > 0 {
		size = s.closeSteps
	}
	return updateInBatches(s, size, list, fn)
}

// subtree lists every inode below root (root excluded), parents first.
func (s *Store) subtree(root uint64) ([]*shedfs.Inode, error) {
	var out []*shedfs.Inode
	seen := map[uint64]bool{}
	err := s.view(func(o *op) error {
		queue := []uint64{root}
		for len(queue) > 0 {
			d := queue[0]
			queue = queue[1:]
			var kids []uint64
			if err := o.tx.Scan(o.k.entryPrefix(d), nil, func(_, v []byte) error {
				child, _, err := decodeEntry(v)
				if err != nil {
					return err
				}
				kids = append(kids, child)
				return nil
			}); err != nil {
				return err
			}
			for _, c := range kids {
				if seen[c] {
					continue // a hard link met again
				}
				seen[c] = true
				n, err := o.inode(c)
				if err != nil {
					return err
				}
				out = append(out, n)
				if n.IsDir() {
					queue = append(queue, c)
				}
			}
		}
		return nil
	})
	return out, err
}

// closeSession is CloseSession's transaction; moved maps every old
// number of the tree (the root to the placeholder) to its new one.
func (o *op) closeSession(ss *Session, moved map[uint64]uint64) error {
	for old := range moved {
		if old == ss.Root {
			continue
		}
		n, err := o.copyInode(ss, old, moved)
		if err != nil {
			return err
		}
		if _, err := o.deleteInode(n); err != nil {
			return err
		}
	}
	return o.linkSession(ss, moved)
}

// copyInode writes the renumbered copy of inode old of session ss's
// tree (private zone, parent and entries through moved) with its
// records, and returns old as it is.
func (o *op) copyInode(ss *Session, old uint64, moved map[uint64]uint64) (*shedfs.Inode, error) {
	n, err := o.inode(old)
	if err != nil {
		return nil, err
	}
	cp := *n
	cp.Ino, cp.Zone = moved[old], shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: ss.User}
	if cp.IsDir() {
		cp.Parent = moved[n.Parent]
	}
	if err := o.copyRecords(old, cp.Ino, moved, true); err != nil {
		return nil, err
	}
	o.put(&cp)
	return n, nil
}

// linkSession ends a close: the placeholder gets the scratch root's
// entries (renumbered through moved, whose copies exist), and the root,
// the session's usage, limit and record go. ENOENT when the session was
// closed meanwhile.
func (o *op) linkSession(ss *Session, moved map[uint64]uint64) error {
	if _, err := o.tx.Get(sessionKey(ss.User, ss.ID)); err != nil {
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("session %s of %s: %w", ss.ID, ss.User, syscall.ENOENT)
		}
		return err
	}
	place, err := o.dir(ss.Placeholder)
	if err != nil {
		return fmt.Errorf("placeholder of the session: %w", err)
	}
	if err := o.tx.Scan(o.k.entryPrefix(ss.Root), nil, func(_, v []byte) error {
		_, mode, err := decodeEntry(v)
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			place.Nlink++
		}
		return err
	}); err != nil {
		return err
	}
	root, err := o.inode(ss.Root)
	if err != nil {
		return err
	}
	if err := o.copyRecords(ss.Root, ss.Placeholder, moved, false); err != nil {
		return err
	}
	xattrs, err := o.deleteInode(root)
	if err != nil {
		return err
	}
	o.touchDir(place)
	h := shedfs.HolderOf(root.Zone)
	for _, k := range [][]byte{usageKey(h), limitKey(h), sessionKey(ss.User, ss.ID)} {
		if err := o.tx.Delete(k); err != nil {
			return err
		}
	}
	return o.charge(shedfs.UserHolder(ss.User), -xattrs, -1)
}

// copyRecords gives ino the entries (their children renumbered through
// moved), xattrs, content records and, with birth, the birth of old.
func (o *op) copyRecords(old, ino uint64, moved map[uint64]uint64, birth bool) error {
	type kv struct{ k, v []byte }
	var sets []kv
	if err := o.tx.Scan(o.k.entryPrefix(old), nil, func(k, v []byte) error {
		child, mode, err := decodeEntry(v)
		if err != nil {
			return err
		}
		sets = append(sets, kv{o.k.entry(ino, string(k[9:])), entryValue(moved[child], mode)})
		return nil
	}); err != nil {
		return err
	}
	if err := o.tx.Scan(xattrPrefix(old), nil, func(k, v []byte) error {
		sets = append(sets, kv{xattrKey(ino, string(k[9:])), append([]byte(nil), v...)})
		return nil
	}); err != nil {
		return err
	}
	for _, p := range []byte{pContent, pPending, pQuarantine, pBirth} {
		if p == pBirth && !birth {
			continue
		}
		v, err := o.tx.Get(inoKey(p, old))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		sets = append(sets, kv{inoKey(p, ino), append([]byte(nil), v...)})
	}
	for _, s := range sets {
		if err := o.tx.Set(s.k, s.v); err != nil {
			return err
		}
	}
	return o.carryFork(old, ino)
}

// moveSessionTrash moves what session ss kept in its trash (what it
// removed from its scratch) into its user's trash: each kept file gets a
// new number of the private zone, its blob linked to it first and its
// records going with it (as closeSession renumbers the tree), and a
// trash record of the user with its time, who removed it and why, and
// its path under sessions/ID, where close keeps the scratch tree, so
// that restore puts it back there. Its charge leaves the session and
// stays with the user, who had it already. Each batch is one
// transaction that leaves the store whole: a crash between two leaves
// some kept files moved, the session otherwise intact.
func (s *Store) moveSessionTrash(ss *Session, b SessionBlobs) error {
	list, err := s.ListTrash([]shedfs.Holder{shedfs.SessionHolder(ss.User, ss.ID)})
	if err != nil {
		return fmt.Errorf("list the session's trash: %w", err)
	}
	size := closeBatch
	if s.closeSteps > 0 {
		size = s.closeSteps
	}
	for len(list) > 0 {
		batch := list[:min(size, len(list))]
		moved := make(map[uint64]uint64, len(batch))
		var linked []uint64
		undo := func(inos []uint64) {
			for _, ino := range inos {
				_ = b.Remove(ino)
			}
		}
		for _, te := range batch {
			ino, err := s.allocIno()
			if err != nil {
				undo(linked)
				return err
			}
			moved[te.Ino] = ino
			if te.Mode&syscall.S_IFMT == syscall.S_IFREG {
				if err := b.Link(te.Ino, ino); err != nil {
					undo(linked)
					return fmt.Errorf("kept file %d: %w", te.Ino, err)
				}
				linked = append(linked, ino)
			}
		}
		var gone []uint64 // left the trash meanwhile (restored, purged)
		err := s.update(func(o *op) error {
			gone = gone[:0]
			for _, te := range batch {
				ok, err := o.moveKept(ss, te.Ino, moved[te.Ino])
				if err != nil {
					return err
				}
				if !ok {
					gone = append(gone, te.Ino)
				}
			}
			return nil
		})
		if err != nil {
			undo(linked)
			if len(batch) > 1 && isTxnTooBig(err) {
				size = max(1, len(batch)/2)
				continue
			}
			return fmt.Errorf("move the session's trash: %w", err)
		}
		for _, te := range batch {
			if te.Mode&syscall.S_IFMT != syscall.S_IFREG {
				continue
			}
			if slices.Contains(gone, te.Ino) {
				_ = b.Remove(moved[te.Ino])
			} else {
				_ = b.Remove(te.Ino)
			}
		}
		list = list[len(batch):]
	}
	return nil
}

// moveKept moves kept file old of session ss into its user's trash as
// inode ino (moveSessionTrash); false when old is no longer in the trash.
func (o *op) moveKept(ss *Session, old, ino uint64) (bool, error) {
	e, k, err := o.trashOf(old)
	if errors.Is(err, syscall.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := o.inode(old)
	if err != nil {
		return false, err
	}
	cp := *n
	cp.Ino, cp.Zone = ino, shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: ss.User}
	if err := o.copyRecords(old, ino, nil, true); err != nil {
		return false, err
	}
	o.put(&cp)
	xattrs, err := o.deleteInode(n)
	if err != nil {
		return false, err
	}
	if err := o.dropTrash(old, k); err != nil {
		return false, err
	}
	note := &TrashNote{By: e.By, Why: e.Why, Path: path.Join(shedfs.SessionsDir, ss.ID, e.Path), at: e.Time.UnixNano()}
	if err := o.addTrash(&cp, note); err != nil {
		return false, err
	}
	return true, o.chargeOnly(shedfs.SessionHolder(ss.User, ss.ID), -chargeOf(n)-xattrs, -1)
}
