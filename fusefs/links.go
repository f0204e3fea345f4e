package fusefs

import (
	"sync"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/links"
)

// Links is the daemon's share-by-link service as the views use it: reading
// user.shedfs.link makes a link, so an agent hands a person a URL with the
// tools it already has.
type Links interface {
	// NewLink makes a link for user to inode ino (dir: the directory
	// holding it, for the path link list shows; 0 if unknown) that lives
	// ttl (0: the store's default) and returns its URL.
	NewLink(user string, ino, dir uint64, ttl time.Duration) (string, error)
	// DefaultTTL is how long a link lives when no lifetime is set.
	DefaultTTL() time.Duration
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

// getLinkXattr answers getxattr of user.shedfs.link (a new link to n) and
// user.shedfs.link.ttl (the lifetime of the links this view makes to n).
// Without a link service it is ENOTSUP; entries other than files and
// directories cannot be linked (ENOTSUP too).
func (n *node) getLinkXattr(attr string, dest []byte) (uint32, syscall.Errno) {
	f := n.v.fs
	rec, e := n.load()
	if e != 0 {
		return 0, e
	}
	d := acl.ShareLink(n.v.actor(), acl.EntryOf(rec))
	if d.Allowed() && attr == acl.XattrLink {
		// A new link: also nothing it could never open (in trash/,
		// quarantined), as for shedfs link create.
		what := acl.Linkable{Named: rec.Nlink > 0}
		if svc := f.opts.Content; svc != nil && rec.IsRegular() {
			c, err := svc.Content(n.ino, n.zone)
			if err != nil {
				return 0, f.errno("scan state", err)
			}
			what.Content = c
		}
		d = acl.NewLink(n.v.actor(), acl.EntryOf(rec), what)
	}
	if !d.Allowed() {
		return 0, n.deny(acl.OpRead, "", d)
	}
	if f.opts.Links == nil || !(rec.IsRegular() || rec.IsDir()) {
		return 0, syscall.ENOTSUP
	}
	var val string
	if attr == acl.XattrLinkTTL {
		d, ok := n.v.links.ttlOf(n.ino)
		if !ok {
			d = f.opts.Links.DefaultTTL()
		}
		val = d.String()
	} else if val, e = n.newLink(rec, len(dest) == 0); e != 0 {
		return 0, e
	}
	if len(dest) == 0 {
		return uint32(len(val)), 0
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

// newLink makes a link to n for the view's user, or hands out the one a
// size query just made.
func (n *node) newLink(rec *shedfs.Inode, sizeQuery bool) (string, syscall.Errno) {
	now := time.Now()
	if !sizeQuery {
		if url, ok := n.v.links.take(n.ino, now); ok {
			return url, 0
		}
	}
	var dir uint64
	if _, p := n.Parent(); p != nil {
		if pn, ok := p.Operations().(*node); ok {
			dir = pn.ino
		}
	}
	ttl, _ := n.v.links.ttlOf(n.ino)
	url, err := n.v.fs.opts.Links.NewLink(n.v.user, rec.Ino, dir, ttl)
	if err != nil {
		return "", n.v.fs.errno("share link", err)
	}
	if sizeQuery {
		n.v.links.keep(n.ino, url, now)
	}
	n.changed("share_link", "", 0)
	return url, 0
}

// setLinkTTL sets the lifetime of the links this view makes to n from now
// on ("2h", "7d"; links.ParseTTL), as acl.SetLinkTTL allows.
func (n *node) setLinkTTL(value string) syscall.Errno {
	rec, e := n.load()
	if e != 0 {
		return e
	}
	d, err := links.ParseTTL(value)
	if dec := acl.SetLinkTTL(n.v.actor(), acl.EntryOf(rec), err == nil); !dec.Allowed() {
		return n.deny(acl.OpSetattr, "", dec)
	}
	if n.v.fs.opts.Links == nil {
		return syscall.ENOTSUP
	}
	n.v.links.setTTL(n.ino, d)
	return 0
}
