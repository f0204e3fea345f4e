// Package web serves shedfs's share-by-link links over HTTP: a signed,
// expiring, revocable URL opens one file or one folder of the store for a
// person without a view. It is its own package because it answers
// strangers on a network, not the kernel or the root-only admin socket:
// everything here assumes a hostile client, and decides access with the
// same acl function the views use (acl.ShareLink: the link's maker must
// still be able to read the entry in their view), never a rule of its own.
// Token format and signing are package links.
package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/links"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// Defaults of Options.
const (
	DefaultMaxConcurrent = 64
	DefaultPerClient     = 8
	DefaultPerLink       = 16
	DefaultPageSize      = 200
	DefaultPurgeInterval = 10 * time.Minute
)

// DefaultReaders is the default of Options.Readers: half the CPUs, at
// least one, so that the views keep the rest.
func DefaultReaders() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// Options configure a Service.
type Options struct {
	// Core is the store as every door sees it (vfs.Core): its records and
	// blobs, inodes with what the views hold open laid over, the audit
	// trail (an event per request, op download), and the admission of a
	// new link record by the store's disk.
	Core *vfs.Core
	// Dir is the store directory, which holds the link key (KeyFile).
	Dir string
	// PublicURL is what links start with ("https://files.example.org");
	// empty: "http://" and the address listened on, and no links can be
	// made before Listen.
	PublicURL string
	// Registerer gets the HTTP metrics; nil keeps them unexported.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// MaxConcurrent caps requests served at once; more get 503. A
	// request waiting for a scan verdict is not counted (limits.go).
	MaxConcurrent int
	// PerClient caps the requests under way of one client (an IPv4
	// address, an IPv6 /64), PerLink those on one link, waiting ones
	// included; more get 503.
	PerClient, PerLink int
	// Readers caps the requests reading the store at once (resolving a
	// link, building a folder page); others queue a while, then get 503.
	Readers int
	// PageSize is how many entries a folder page shows.
	PageSize int
	// PurgeInterval is how often expired link records are deleted.
	PurgeInterval time.Duration
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// Content decides, before a file is served, by its scan verdict
	// (pending: 503 with Retry-After; infected: 403), and gives its
	// SHA-256 for a strong ETag; nil serves every file with a weak ETag.
	Content Content
}

// Content is what the link server needs of the digest and scan service
// (content.Service.ForLink): the decision an open from a view that did not
// write the file gets, and the file's digest when it may be served.
type Content interface {
	ForLink(ctx context.Context, ino uint64, z shedfs.Zone) (sha256 string, c shedfs.Content, d acl.Decision)
	// Content is what is known of ino's content now, without waiting:
	// a quarantined file is not linked (acl.NewLink).
	Content(ino uint64, z shedfs.Zone) (shedfs.Content, error)
}

// linkRecordSize is what a link record may add to the store's disk.
const linkRecordSize = 512

// Service makes, lists and revokes links, and serves them (server.go).
type Service struct {
	opts    Options
	log     *slog.Logger
	store   *metadata.Store
	metrics *metrics
	lim     *limits

	mu     sync.Mutex
	key    links.Key
	public string
	srv    *server

	// listings are the folder pages' sorted listings (pages.go).
	listings listings

	// dirNames remembers the name each directory was last found under
	// (dirPath), so that finding it again is one lookup, not a read of
	// its parent.
	dirNames nameCache
}

// Info is one link as link list shows it. Path is where the entry is now
// in its maker's view ("" when it is gone); URL is empty when no daemon
// serves links.
type Info struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`
	Path      string    `json:"path"`
	URL       string    `json:"url,omitempty"`
	Ino       uint64    `json:"ino"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	Downloads uint64    `json:"downloads"`
}

// ErrNotServing is the error of making a link while nothing serves them.
var ErrNotServing = errors.New("no daemon serves links: start shedfs serve or mount with --http")

// ErrKeyMissing is the error of serving or making links while the key
// live links were made under is missing (signingKey).
var ErrKeyMissing = errors.New("link key missing")

// New prepares a Service; it listens only after Listen. The key file is
// read (or made) on first use, so a Service that only lists links never
// writes to the store.
func New(opts Options) (*Service, error) {
	if opts.Core == nil {
		return nil, errors.New("links: no core")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.PerClient <= 0 {
		opts.PerClient = DefaultPerClient
	}
	if opts.PerLink <= 0 {
		opts.PerLink = DefaultPerLink
	}
	if opts.Readers <= 0 {
		opts.Readers = DefaultReaders()
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.PurgeInterval <= 0 {
		opts.PurgeInterval = DefaultPurgeInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Service{
		opts:    opts,
		log:     opts.Logger,
		store:   opts.Core.Store(),
		metrics: m,
		lim:     newLimits(opts.MaxConcurrent, opts.Readers, opts.PerClient, opts.PerLink),
		public:  strings.TrimRight(opts.PublicURL, "/"),
	}, nil
}

// statOf reads an inode as the views see it: an open file at the size
// its writes reached.
func (s *Service) statOf(ino uint64) (*shedfs.Inode, error) { return s.opts.Core.Stat(ino) }

// signingKey returns the link key, reading the key file once. Without a
// key file one is made, but only while no live link was made under a
// key: then the key went missing (a store moved without it), and a new
// one would turn every link into a 403 without a word. Restoring the
// file, or rotate-key (which revokes those links), is the way on.
func (s *Service) signingKey() (links.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	k, err := LoadKey(s.opts.Dir, s.log)
	if errors.Is(err, fs.ErrNotExist) {
		k, err = s.firstKey()
	}
	if err != nil {
		return nil, err
	}
	s.key = k
	return k, nil
}

// firstKey makes the store's first link key, when no live link needs
// another.
func (s *Service) firstKey() (links.Key, error) {
	p := filepath.Join(s.opts.Dir, KeyFile)
	all, err := s.store.ListLinks()
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	now := s.opts.Now()
	live := 0
	for _, l := range all {
		if now.Before(l.Expires) {
			live++
		}
	}
	if live > 0 {
		return nil, fmt.Errorf("%w: %s is missing, and %d live links were made under it: restore the file "+
			"(shedfs migrate puts it beside the blobs), or run shedfs link rotate-key to revoke them and make a new key",
			ErrKeyMissing, p, live)
	}
	k, err := writeKey(s.opts.Dir, false, nil)
	if err != nil {
		return nil, err
	}
	s.log.Info("link key made", "path", p)
	return k, nil
}

// RotateKey replaces the link key: every link made so far stops working,
// and their records go (a record of another key opens nothing anyway,
// links.Check, so one made while this runs is dead too).
func (s *Service) RotateKey() error {
	k, err := RotateKey(s.opts.Dir)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.key = k
	s.mu.Unlock()
	id := k.KeyID()
	n, err := s.store.DropLinks(func(l metadata.Link) bool { return l.Key != id })
	if err != nil {
		return fmt.Errorf("link key rotated, but revoking the links made before: %w", err)
	}
	s.log.Info("link key rotated: every link made before is revoked", "links", n)
	return nil
}

// staleLinks counts the live link records made under another key than
// k: their key file was replaced (not rotated), and they open nothing.
func (s *Service) staleLinks(k links.Key) int {
	all, err := s.store.ListLinks()
	if err != nil {
		return 0
	}
	id, now, n := k.KeyID(), s.opts.Now(), 0
	for _, l := range all {
		if l.Key != "" && l.Key != id && now.Before(l.Expires) {
			n++
		}
	}
	return n
}

// DefaultTTL is the store's default link lifetime (links.DefaultTTL when
// unset), implementing fusefs.Links.
func (s *Service) DefaultTTL() time.Duration {
	st, err := s.store.GetSettings()
	if err != nil || st.DefaultLinkTTL <= 0 {
		return links.DefaultTTL
	}
	return min(st.DefaultLinkTTL, links.MaxTTL)
}

// NewLink makes a link and returns its URL (fusefs.Links).
func (s *Service) NewLink(user string, ino, dir uint64, ttl time.Duration) (string, error) {
	info, err := s.Create(user, ino, dir, ttl)
	if err != nil {
		return "", err
	}
	return info.URL, nil
}

// makerOf is the maker of a link, user, with the groups they are in now:
// ENOENT for a user that no longer exists, or is another user of the
// name than the one whose private root was root (0: any).
func (s *Service) makerOf(user string, root uint64) (*shedfs.User, acl.Actor, error) {
	u, err := s.store.GetUser(user)
	if err != nil {
		return nil, acl.Actor{}, err
	}
	if root != 0 && u.Roots.Private != root {
		return nil, acl.Actor{}, fmt.Errorf("user %s was removed and added again: %w", user, syscall.ENOENT)
	}
	groups, err := s.store.GroupsOf(user)
	if err != nil {
		return nil, acl.Actor{}, err
	}
	return u, acl.Actor{User: user, Groups: groups}, nil
}

// Create makes a link for user to inode ino, which lies in directory dir
// (0 for a directory or when unknown), living ttl (0: DefaultTTL). The
// user must be able to read the inode (acl.ShareLink); a refusal is an
// error wrapping the decision's errno.
func (s *Service) Create(user string, ino, dir uint64, ttl time.Duration) (*Info, error) {
	public := s.publicURL()
	if public == "" {
		return nil, ErrNotServing
	}
	if ttl == 0 {
		ttl = s.DefaultTTL()
	}
	if ttl < links.MinTTL || ttl > links.MaxTTL {
		return nil, fmt.Errorf("link lifetime %v: must be between %v and %v: %w", ttl, links.MinTTL, links.MaxTTL, syscall.EINVAL)
	}
	u, actor, err := s.makerOf(user, 0)
	if err != nil {
		return nil, fmt.Errorf("link for %s: %w", user, err)
	}
	rec, err := s.statOf(ino)
	if err != nil {
		return nil, fmt.Errorf("link to inode %d: %w", ino, err)
	}
	what := acl.Linkable{Named: rec.Nlink > 0}
	if s.opts.Content != nil && rec.IsRegular() {
		if what.Content, err = s.opts.Content.Content(ino, rec.Zone); err != nil {
			return nil, fmt.Errorf("link to inode %d: %w", ino, err)
		}
	}
	if d := acl.NewLink(actor, acl.EntryOf(rec), what); !d.Allowed() {
		return nil, fmt.Errorf("link for %s: %s: %w", user, d.Reason, d.Errno)
	}
	if !rec.IsRegular() && !rec.IsDir() {
		return nil, fmt.Errorf("link to inode %d: only files and folders can be linked: %w", ino, syscall.ENOTSUP)
	}
	adm, d, err := s.opts.Core.Admit(vfs.Growth{Disk: linkRecordSize})
	if err != nil {
		return nil, fmt.Errorf("link for %s: %w", user, err)
	}
	if !d.Allowed() {
		return nil, fmt.Errorf("link for %s: %s: %w", user, d.Reason, d.Errno)
	}
	adm.Done()
	key, err := s.signingKey()
	if err != nil {
		return nil, err
	}
	id, err := links.NewID()
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	l := metadata.Link{
		ID: id.String(), User: user, Ino: ino, UserRoot: u.Roots.Private, Key: key.KeyID(),
		Created: now.Truncate(time.Second), Expires: links.Expiry(now, ttl),
	}
	if !rec.IsDir() {
		l.Dir = dir
		l.Name = s.nameIn(dir, ino, "")
	}
	if err := s.store.PutLink(l); err != nil {
		return nil, fmt.Errorf("store link: %w", err)
	}
	return s.info(l, key, public), nil
}

// List returns the live links, of user only when user is set: not those
// expired, made under a key since rotated, or by a user since removed.
func (s *Service) List(user string) ([]Info, error) {
	all, err := s.store.ListLinks()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	public := s.publicURL()
	var key links.Key
	if public != "" {
		if key, err = s.signingKey(); err != nil {
			return nil, err
		}
	} else if key, err = LoadKey(s.opts.Dir, s.log); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	now := s.opts.Now()
	roots := map[string]uint64{} // each maker's private root now, 0: gone
	out := []Info{}
	for _, l := range all {
		if (user != "" && l.User != user) || !now.Before(l.Expires) {
			continue
		}
		if key != nil && l.Key != "" && l.Key != key.KeyID() {
			continue
		}
		root, ok := roots[l.User]
		if !ok {
			if u, err := s.store.GetUser(l.User); err == nil {
				root = u.Roots.Private
			}
			roots[l.User] = root
		}
		if root == 0 || l.UserRoot != 0 && l.UserRoot != root {
			continue
		}
		out = append(out, *s.info(l, key, public))
	}
	return out, nil
}

// Revoke deletes link records; a missing one is ENOENT, after the others
// are gone.
func (s *Service) Revoke(ids ...string) error {
	var errs []error
	for _, id := range ids {
		if err := s.store.DeleteLink(id); err != nil {
			errs = append(errs, fmt.Errorf("link %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// info describes a link record.
func (s *Service) info(l metadata.Link, key links.Key, public string) *Info {
	in := &Info{
		ID: l.ID, User: l.User, Path: s.pathOf(l), Ino: l.Ino,
		Created: l.Created, Expires: l.Expires, Downloads: l.Downloads,
	}
	if id, err := links.ParseID(l.ID); err == nil && public != "" && key != nil {
		in.URL = public + "/l/" + links.Sign(key, links.Token{ID: id, Expires: l.Expires})
	}
	return in
}

func (s *Service) publicURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.public
}

// maxDepth bounds every walk up the tree.
const maxDepth = 4096

// nameIn is the name of ino in directory dir now, "" if none. The name
// it was last seen under, hint, is tried first: one lookup, where reading
// the directory costs as much as its entries (10,000 in a large one).
func (s *Service) nameIn(dir, ino uint64, hint string) string {
	if dir == 0 {
		return ""
	}
	if hint != "" {
		if e, err := s.store.Lookup(dir, hint); err == nil && e.Ino == ino {
			return hint
		}
	}
	ents, err := s.store.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if e.Ino == ino {
			return e.Name
		}
	}
	return ""
}

// placeOf is where a linked file is now: its name in the directory it was
// linked in (one lookup while it keeps its name there), else a name it has
// anywhere (it was moved, or renamed and the directory read), which the
// record keeps for the next request. 0, "" when it has none.
func (s *Service) placeOf(l metadata.Link) (dir uint64, name string) {
	if name := s.nameIn(l.Dir, l.Ino, l.Name); name != "" {
		dir = l.Dir
		if name != l.Name {
			s.remember(l, dir, name)
		}
		return dir, name
	}
	names, err := s.store.NamesOf(l.Ino)
	if err != nil || len(names) == 0 {
		return 0, ""
	}
	s.remember(l, names[0].Parent, names[0].Name)
	return names[0].Parent, names[0].Name
}

// remember records where a linked file was found, unless the store's disk
// is down to what its metadata needs.
func (s *Service) remember(l metadata.Link, dir uint64, name string) {
	if s.opts.Core.DiskShort() {
		return
	}
	if err := s.store.PlaceLink(l.ID, dir, name); err != nil && !errors.Is(err, syscall.ENOENT) {
		s.log.Warn("record where a linked file is", "link", l.ID, "err", err)
	}
}

// dirPath is where directory ino is in its zone's views ("output/a/b"),
// "" when it cannot be found.
func (s *Service) dirPath(ino uint64) string {
	var names []string
	for range maxDepth {
		d, err := s.store.GetInode(ino)
		if err != nil {
			return ""
		}
		if d.Parent == 0 {
			slicesReverse(names)
			// The private root is the view root: ".".
			return path.Join(append([]string{".", zones.RootPath(d.Zone)}, names...)...)
		}
		name := s.nameIn(d.Parent, ino, s.dirNames.get(ino))
		if name == "" {
			return ""
		}
		s.dirNames.put(ino, name)
		names = append(names, name)
		ino = d.Parent
	}
	return ""
}

// pathOf is where a link's entry is now in its maker's view, "" once it
// has no name.
func (s *Service) pathOf(l metadata.Link) string {
	rec, err := s.store.GetInode(l.Ino)
	if err != nil || rec.Nlink == 0 {
		return ""
	}
	if rec.IsDir() {
		return s.dirPath(l.Ino)
	}
	dir, name := s.placeOf(l)
	if name == "" {
		return ""
	}
	if p := s.dirPath(dir); p != "" {
		return path.Join(p, name)
	}
	return ""
}

// nameCache maps directories to the name they were last found under; a
// hint, checked by a lookup before it is believed. It forgets everything
// when full.
type nameCache struct {
	mu    sync.Mutex
	names map[uint64]string
}

const nameCacheSize = 4096

func (c *nameCache) get(ino uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[ino]
}

func (c *nameCache) put(ino uint64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil || len(c.names) >= nameCacheSize {
		c.names = make(map[uint64]string)
	}
	c.names[ino] = name
}

func slicesReverse(s []string) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
