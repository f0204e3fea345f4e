package vfs

import (
	"sync"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/links"
)

// Share-by-link through xattrs: reading user.shedfs.link on a view's
// entry makes a link to it, so an agent hands a person a URL with the
// tools it already has; user.shedfs.link.ttl is the lifetime of the links
// the view makes to it. The link service (web) makes and serves links;
// the rules and the view's state are here, so every door that answers
// xattrs answers them alike.

// Links is the process's share-by-link service as the views use it
// (web.Service).
type Links interface {
	// NewLink makes a link for user to inode ino (dir: the directory
	// holding it, for the path link list shows; 0 if unknown) that lives
	// ttl (0: the store's default) and returns its URL.
	NewLink(user string, ino, dir uint64, ttl time.Duration) (string, error)
	// DefaultTTL is how long a link lives when no lifetime is set.
	DefaultTTL() time.Duration
}

// SetLinks sets the link service; without one (no --http) the link
// attributes are ENOTSUP. Set before any view is served.
func (c *Core) SetLinks(l Links) { c.links = l }

// Parented is a Paths that also knows the directory holding the inode in
// the door's view (a FUSE node's parent), for the path a link lists.
type Parented interface {
	ParentIno() uint64
}

// issuedFor is how long the link made for a size query (getxattr with an
// empty buffer) waits for the read that follows it.
const issuedFor = 10 * time.Second

// viewLinks is one view's share-by-link state: the lifetimes set with
// user.shedfs.link.ttl, per inode, and the link each size query made, so
// that one getfattr (a size query, then the read) makes one link.
type viewLinks struct {
	mu     sync.Mutex
	ttl    map[uint64]time.Duration
	issued map[uint64]issuedLink
}

type issuedLink struct {
	url string
	at  time.Time
}

func (l *viewLinks) ttlOf(ino uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.ttl[ino]
	return d, ok
}

func (l *viewLinks) setTTL(ino uint64, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ttl == nil {
		l.ttl = make(map[uint64]time.Duration)
	}
	l.ttl[ino] = d
}

// keep remembers the link a size query made; stale ones go.
func (l *viewLinks) keep(ino uint64, url string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.issued == nil {
		l.issued = make(map[uint64]issuedLink)
	}
	for i, is := range l.issued {
		if now.Sub(is.at) > issuedFor {
			delete(l.issued, i)
		}
	}
	l.issued[ino] = issuedLink{url: url, at: now}
}

// take hands out the link a recent size query made for ino, once.
func (l *viewLinks) take(ino uint64, now time.Time) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	is, ok := l.issued[ino]
	delete(l.issued, ino)
	return is.url, ok && now.Sub(is.at) <= issuedFor
}

// linkXattr answers user.shedfs.link (a new link to at) and
// user.shedfs.link.ttl (the lifetime of the links this view makes to
// at); sizeOnly is a size query, whose link is kept for the read that
// follows. Without a link service it is ENOTSUP; entries other than
// files and directories cannot be linked (ENOTSUP too).
func (v *View) linkXattr(at At, attr string, sizeOnly bool) ([]byte, syscall.Errno) {
	c := v.c
	rec, e := v.Load(at)
	if e != 0 {
		return nil, e
	}
	d := acl.ShareLink(v.Actor(), acl.EntryOf(rec))
	if d.Allowed() && attr == acl.XattrLink {
		// A new link: also nothing it could never open (in trash/,
		// quarantined), as for shedfs link create.
		what := acl.Linkable{Named: rec.Nlink > 0}
		if svc := c.content; svc != nil && rec.IsRegular() {
			cont, err := svc.Content(at.Ino, at.Zone)
			if err != nil {
				return nil, c.Errno("scan state", err)
			}
			what.Content = cont
		}
		d = acl.NewLink(v.Actor(), acl.EntryOf(rec), what)
	}
	if !d.Allowed() {
		return nil, v.deny(acl.OpRead, at, "", d)
	}
	if c.links == nil || !(rec.IsRegular() || rec.IsDir()) {
		return nil, syscall.ENOTSUP
	}
	if attr == acl.XattrLinkTTL {
		d, ok := v.links.ttlOf(at.Ino)
		if !ok {
			d = c.links.DefaultTTL()
		}
		return []byte(d.String()), 0
	}
	url, e := v.newLink(at, rec, sizeOnly)
	return []byte(url), e
}

// newLink makes a link to at for the view's user, or hands out the one a
// size query just made.
func (v *View) newLink(at At, rec *shedfs.Inode, sizeOnly bool) (string, syscall.Errno) {
	now := time.Now()
	if !sizeOnly {
		if url, ok := v.links.take(at.Ino, now); ok {
			return url, 0
		}
	}
	var dir uint64
	if p, ok := at.Paths.(Parented); ok {
		dir = p.ParentIno()
	}
	ttl, _ := v.links.ttlOf(at.Ino)
	url, err := v.c.links.NewLink(v.user, rec.Ino, dir, ttl)
	if err != nil {
		return "", v.c.Errno("share link", err)
	}
	if sizeOnly {
		v.links.keep(at.Ino, url, now)
	}
	v.changed("share_link", at, "", 0)
	return url, 0
}

// setLinkTTL sets the lifetime of the links this view makes to at from
// now on ("2h", "7d"; links.ParseTTL), as acl.SetLinkTTL allows.
func (v *View) setLinkTTL(at At, value string) syscall.Errno {
	rec, e := v.Load(at)
	if e != 0 {
		return e
	}
	d, err := links.ParseTTL(value)
	if dec := acl.SetLinkTTL(v.Actor(), acl.EntryOf(rec), err == nil); !dec.Allowed() {
		return v.deny(acl.OpSetattr, at, "", dec)
	}
	if v.c.links == nil {
		return syscall.ENOTSUP
	}
	v.links.setTTL(at.Ino, d)
	return 0
}
