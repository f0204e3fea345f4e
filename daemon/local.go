package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/web"
)

// mounter is how a running daemon learns about changes to the set of
// users, so that it mounts and unmounts their views. A Local without one
// (the CLI's direct path) only changes the store. What the views' caches
// must learn of a change goes through the core (vfs), not through here.
type mounter interface {
	// userAdded mounts the new user's view.
	userAdded(ctx context.Context, u *shedfs.User) error
	// userRemoving unmounts the user's view before its data goes; an error
	// stops the removal.
	userRemoving(ctx context.Context, name string) error
	// viewOf is the mountpoint of the user's view, "" if none.
	viewOf(name string) string
	// defaultView is how the views of a user without an owner of its
	// own present entries; presenting notes the options a user's managed
	// view presents after an owner change.
	defaultView() vfs.ViewOptions
	presenting(user string, opts vfs.ViewOptions)
	// fillStatus adds what only the daemon knows to a status.
	fillStatus(st *Status)
}

// Local performs admin operations directly on an open store. The daemon
// serves it over the admin socket; the CLI uses it itself when no daemon
// runs, which is why both ways give the same results.
type Local struct {
	st  *Store
	log *slog.Logger
	// core admits every growth (imports, restores, new principals) and
	// tells the views of a running daemon what changed; the CLI's has no
	// views attached, so nothing is pending and nothing is told.
	core  *vfs.Core
	mount mounter
	// links is the share-by-link service (links_api.go).
	links   *web.Service
	linksMu sync.Mutex
	// content hashes and scans imports and answers mode get; the
	// daemon's runs the background queue, a CLI's only hashes.
	content *content.Service

	// mu serialises changes, so that a user is never removed while its
	// view is being mounted, or added twice at once. It is held for
	// store changes only, never while waiting on a view.
	mu sync.Mutex
	// sessions serialises the open and the close of each session, so
	// that sessions never wait on each other (session.go).
	sessions keyedLocks
	// trashStep, set by tests, runs before each name of a closed
	// session's tree goes to the trash; an error stops the close there,
	// as a crash would.
	trashStep func() error
	// clock, set by tests, stands in for time.Now where a lifetime is
	// decided (tokens).
	clock func() time.Time
}

// NewLocal returns the admin operations on an open store. The caller keeps
// ownership of the store.
func NewLocal(st *Store, log *slog.Logger) *Local {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return newLocal(st, NewCore(st, nil, log), log)
}

// NewLocalOn returns the admin operations on an open store through core,
// the one its other doors use (shedfs mcp without a daemon), so that
// they all see each change at once. The caller keeps ownership of both.
func NewLocalOn(st *Store, core *vfs.Core, log *slog.Logger) *Local {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return newLocal(st, core, log)
}

// newLocal returns the admin operations on an open store through core.
func newLocal(st *Store, core *vfs.Core, log *slog.Logger) *Local {
	return &Local{st: st, log: log, core: core, content: content.New(st.Meta, st.Blobs, content.Options{})}
}

// NewCore returns the core of an open store: its disk guarded when the
// store has a guard, its events recorded by rec (nil: none).
func NewCore(st *Store, rec shedfs.Recorder, log *slog.Logger) *vfs.Core {
	opts := vfs.Options{Logger: log, Recorder: rec}
	if st.Space != nil {
		opts.Space = st.Space
	}
	return vfs.New(st.Meta, st.Blobs, opts)
}

var _ Admin = (*Local)(nil)

// Zone roots each principal is charged for from the start: they are not
// the principal's data.
const (
	userRootInodes  = 3
	groupRootInodes = 1
)

func amount(u shedfs.Usage) Amount { return Amount{Bytes: u.Bytes, Inodes: u.Inodes} }
func limitAmount(l shedfs.Limit) Amount {
	return Amount{Bytes: l.Bytes, Inodes: l.Inodes}
}

// AddUser creates a user, optionally with a presented owner and a quota,
// and (in a daemon) mounts its view.
func (l *Local) AddUser(ctx context.Context, req UserAddRequest) (*UserInfo, error) {
	if err := ValidPrincipalName("user", req.Name); err != nil {
		return nil, err
	}
	if (req.Uid == nil) != (req.Gid == nil) {
		return nil, errorf(CodeInvalid, "uid and gid go together: give both or neither")
	}
	if req.Quota.Bytes < 0 || req.Quota.Inodes < 0 {
		return nil, errorf(CodeInvalid, "quota of user %s: negative limit", req.Name)
	}
	if err := l.room(userRootInodes*shedfs.ChargeUnit, userRootInodes, "add user "+req.Name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u, err := l.st.Meta.AddUser(req.Name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("user %s already exists", req.Name))
	}
	if req.Uid != nil {
		u, err = l.st.Meta.UpdateUser(req.Name, func(u *shedfs.User) error {
			u.Uid, u.Gid = *req.Uid, *req.Gid
			return nil
		})
		if err != nil {
			return nil, asError(err, fmt.Sprintf("set owner of user %s", req.Name))
		}
	}
	if req.Quota != (Amount{}) {
		if err := l.st.Meta.SetLimit(shedfs.UserHolder(req.Name), shedfs.Limit{Bytes: req.Quota.Bytes, Inodes: req.Quota.Inodes}); err != nil {
			return nil, asError(err, fmt.Sprintf("set quota of user %s", req.Name))
		}
	}
	l.log.Info("user added", "user", req.Name)
	if l.mount != nil {
		if err := l.mount.userAdded(ctx, u); err != nil {
			return nil, errorf(CodeMount, "user %s was added, but its view could not be mounted: %v", req.Name, err)
		}
	}
	return l.userInfo(u)
}

// userInfo assembles what is shown about a user.
func (l *Local) userInfo(u *shedfs.User) (*UserInfo, error) {
	groups, err := l.st.Meta.GroupsOf(u.Name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", u.Name))
	}
	used, err := l.core.Accountant().Usage(shedfs.UserHolder(u.Name))
	if err != nil {
		return nil, asError(err, fmt.Sprintf("usage of user %s", u.Name))
	}
	lim, err := l.st.Meta.GetLimit(shedfs.UserHolder(u.Name))
	if err != nil {
		return nil, asError(err, fmt.Sprintf("quota of user %s", u.Name))
	}
	if groups == nil {
		groups = []string{}
	}
	info := &UserInfo{
		Name: u.Name, Created: u.Created.UTC(), Uid: u.Uid, Gid: u.Gid,
		Groups: groups, Used: amount(used), Limit: limitAmount(lim),
	}
	if l.mount != nil {
		info.View = l.mount.viewOf(u.Name)
	}
	return info, nil
}

// ListUsers returns every user, sorted by name.
func (l *Local) ListUsers(ctx context.Context) ([]UserInfo, error) {
	users, err := l.st.Meta.ListUsers()
	if err != nil {
		return nil, asError(err, "list users")
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name < users[j].Name })
	out := make([]UserInfo, 0, len(users))
	for i := range users {
		info, err := l.userInfo(&users[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *info)
	}
	return out, nil
}

// ShowUser returns one user.
func (l *Local) ShowUser(ctx context.Context, name string) (*UserInfo, error) {
	if err := ValidPrincipalName("user", name); err != nil {
		return nil, err
	}
	u, err := l.st.Meta.GetUser(name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", name))
	}
	return l.userInfo(u)
}

// RemoveUser deletes a user with all its private, output and uploads data.
// Without force it refuses when there is data to lose and says how much.
// In a daemon, the user's view is unmounted first.
func (l *Local) RemoveUser(ctx context.Context, name string, force bool) (*RemoveResult, error) {
	if err := ValidPrincipalName("user", name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.st.Meta.GetUser(name); err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", name))
	}
	if err := l.noSessions(name); err != nil {
		return nil, err
	}
	res, err := l.holderData(name, shedfs.UserHolder(name), userRootInodes)
	if err != nil {
		return nil, err
	}
	if !force && (res.Entries > 0 || res.Bytes > 0) {
		return nil, errorf(CodeHasData, "user %s still has %s; add --force to delete it", name, describeData(res))
	}
	if l.mount != nil {
		if err := l.mount.userRemoving(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := l.core.Admin(name).RemoveUser(); err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", name))
	}
	if n, err := l.st.Meta.DropTokens(func(t metadata.Token) bool { return t.User == name }); err != nil {
		l.log.Warn("tokens of a removed user not deleted (they open nothing: each names the user it was made for)", "user", name, "err", err)
	} else if n > 0 {
		l.log.Info("tokens of a removed user deleted", "user", name, "tokens", n)
	}
	l.log.Info("user removed", "user", name, "entries", res.Entries, "bytes", res.Bytes)
	return res, nil
}

// holderData measures what removing a principal would delete.
func (l *Local) holderData(name string, h shedfs.Holder, roots int64) (*RemoveResult, error) {
	used, err := l.core.Accountant().Usage(h)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("usage of %s", h))
	}
	return &RemoveResult{Name: name, Entries: max(used.Inodes-roots, 0), Bytes: used.Bytes}, nil
}

// describeData is "12 files and directories (3.4 MiB)".
func describeData(r *RemoveResult) string {
	what := "files and directories"
	if r.Entries == 1 {
		what = "file or directory"
	}
	return fmt.Sprintf("%d %s (%s)", r.Entries, what, FormatSize(r.Bytes))
}

// AddGroup creates an empty group.
func (l *Local) AddGroup(ctx context.Context, req GroupAddRequest) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", req.Name); err != nil {
		return nil, err
	}
	if err := l.room(groupRootInodes*shedfs.ChargeUnit, groupRootInodes, "add group "+req.Name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g, err := l.st.Meta.AddGroup(req.Name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("group %s already exists", req.Name))
	}
	l.log.Info("group added", "group", req.Name)
	return l.groupInfo(g)
}

// groupInfo assembles what is shown about a group.
func (l *Local) groupInfo(g *shedfs.Group) (*GroupInfo, error) {
	used, err := l.core.Accountant().Usage(shedfs.GroupHolder(g.Name))
	if err != nil {
		return nil, asError(err, fmt.Sprintf("usage of group %s", g.Name))
	}
	lim, err := l.st.Meta.GetLimit(shedfs.GroupHolder(g.Name))
	if err != nil {
		return nil, asError(err, fmt.Sprintf("quota of group %s", g.Name))
	}
	members := slices.Clone(g.Members)
	if members == nil {
		members = []string{}
	}
	sort.Strings(members)
	return &GroupInfo{
		Name: g.Name, Created: g.Created.UTC(), Members: members,
		Used: amount(used), Limit: limitAmount(lim),
	}, nil
}

// ListGroups returns every group, sorted by name.
func (l *Local) ListGroups(ctx context.Context) ([]GroupInfo, error) {
	groups, err := l.st.Meta.ListGroups()
	if err != nil {
		return nil, asError(err, "list groups")
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	out := make([]GroupInfo, 0, len(groups))
	for i := range groups {
		info, err := l.groupInfo(&groups[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *info)
	}
	return out, nil
}

// ShowGroup returns one group.
func (l *Local) ShowGroup(ctx context.Context, name string) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", name); err != nil {
		return nil, err
	}
	g, err := l.st.Meta.GetGroup(name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no group named %s", name))
	}
	return l.groupInfo(g)
}

// RemoveGroup deletes a group and its zone. Like RemoveUser, it refuses
// without force when the group's zone holds data. The former members'
// views drop the group from groups/ at once.
func (l *Local) RemoveGroup(ctx context.Context, name string, force bool) (*RemoveResult, error) {
	if err := ValidPrincipalName("group", name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.st.Meta.GetGroup(name); err != nil {
		return nil, asError(err, fmt.Sprintf("no group named %s", name))
	}
	res, err := l.holderData(name, shedfs.GroupHolder(name), groupRootInodes)
	if err != nil {
		return nil, err
	}
	if !force && (res.Entries > 0 || res.Bytes > 0) {
		return nil, errorf(CodeHasData, "group %s still has %s; add --force to delete it", name, describeData(res))
	}
	if _, err := l.core.RemoveGroup(name); err != nil {
		return nil, asError(err, fmt.Sprintf("no group named %s", name))
	}
	l.log.Info("group removed", "group", name, "entries", res.Entries, "bytes", res.Bytes)
	return res, nil
}

// AddMember adds a user to a group; adding a member again is not an error.
func (l *Local) AddMember(ctx context.Context, group string, req MemberRequest) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", group); err != nil {
		return nil, err
	}
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.st.Meta.GetGroup(group); err != nil {
		return nil, asError(err, fmt.Sprintf("no group named %s", group))
	}
	if err := l.core.Admin(req.User).JoinGroup(group); err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", req.User))
	}
	l.log.Info("member added", "group", group, "user", req.User)
	return l.ShowGroup(ctx, group)
}

// RemoveMember takes a user out of a group.
func (l *Local) RemoveMember(ctx context.Context, group, user string) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", group); err != nil {
		return nil, err
	}
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.st.Meta.GetGroup(group); err != nil {
		return nil, asError(err, fmt.Sprintf("no group named %s", group))
	}
	if err := l.core.Admin(user).LeaveGroup(group); err != nil {
		return nil, asError(err, fmt.Sprintf("%s is not a member of group %s", user, group))
	}
	l.log.Info("member removed", "group", group, "user", user)
	return l.ShowGroup(ctx, group)
}

// holderSyntax checks the form of a holder string (shedfs.ParseHolder),
// with the line the operator reads. It returns the kind and name.
func holderSyntax(s string) (kind, name string, err error) {
	kind, name, err = shedfs.ParseHolder(s)
	if err != nil {
		return "", "", errorf(CodeInvalid, "invalid quota holder %q: use user:NAME, group:NAME or share", s)
	}
	return kind, name, nil
}

// parseHolder checks a holder string and that its principal exists.
func (l *Local) parseHolder(s string) (shedfs.Holder, error) {
	kind, name, err := holderSyntax(s)
	if err != nil {
		return "", err
	}
	switch kind {
	case "user":
		_, err = l.st.Meta.GetUser(name)
	case "group":
		_, err = l.st.Meta.GetGroup(name)
	}
	if err != nil {
		return "", asError(err, fmt.Sprintf("no %s named %s", kind, name))
	}
	return shedfs.Holder(s), nil
}

// SetQuota changes a holder's limits; fields left nil keep their value.
func (l *Local) SetQuota(ctx context.Context, holder string, req QuotaSetRequest) (*QuotaInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, err := l.parseHolder(holder)
	if err != nil {
		return nil, err
	}
	if req.Bytes == nil && req.Inodes == nil {
		return nil, errorf(CodeInvalid, "quota of %s: give bytes, inodes or both", holder)
	}
	if (req.Bytes != nil && *req.Bytes < 0) || (req.Inodes != nil && *req.Inodes < 0) {
		return nil, errorf(CodeInvalid, "quota of %s: negative limit", holder)
	}
	lim, err := l.core.SetLimit(h, req.Bytes, req.Inodes)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("set quota of %s", holder))
	}
	l.log.Info("quota set", "holder", holder, "bytes", lim.Bytes, "inodes", lim.Inodes)
	return l.quotaInfo(h)
}

func (l *Local) quotaInfo(h shedfs.Holder) (*QuotaInfo, error) {
	used, err := l.core.Accountant().Usage(h)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("usage of %s", h))
	}
	lim, err := l.st.Meta.GetLimit(h)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("quota of %s", h))
	}
	trash, err := l.st.Meta.TrashUsage(h)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("trash of %s", h))
	}
	snaps, err := l.st.Meta.SnapshotHeld(h)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("snapshots of %s", h))
	}
	return &QuotaInfo{Holder: string(h), Used: amount(used), Limit: limitAmount(lim), Trash: amount(trash), Snapshots: Amount{Bytes: snaps},
		Over: amount(acl.Overshoot(used, lim))}, nil
}

// ShowQuota returns one holder's quota, or every holder's (share, every
// group and every user, sorted) when holder is empty.
func (l *Local) ShowQuota(ctx context.Context, holder string) ([]QuotaInfo, error) {
	var holders []shedfs.Holder
	if holder != "" {
		h, err := l.parseHolder(holder)
		if err != nil {
			return nil, err
		}
		holders = []shedfs.Holder{h}
	} else {
		users, err := l.st.Meta.ListUsers()
		if err != nil {
			return nil, asError(err, "list users")
		}
		groups, err := l.st.Meta.ListGroups()
		if err != nil {
			return nil, asError(err, "list groups")
		}
		holders = append(holders, "share")
		for _, g := range groups {
			holders = append(holders, shedfs.GroupHolder(g.Name))
		}
		for _, u := range users {
			holders = append(holders, shedfs.UserHolder(u.Name))
		}
		slices.Sort(holders)
		holders = slices.Compact(holders)
	}
	out := make([]QuotaInfo, 0, len(holders))
	for _, h := range holders {
		q, err := l.quotaInfo(h)
		if err != nil {
			return nil, err
		}
		out = append(out, *q)
	}
	return out, nil
}

// Status describes the store (principals, quota usage, size, last fsck)
// and, when a daemon runs, its views, open files and request rate.
func (l *Local) Status(ctx context.Context) (*Status, error) {
	users, err := l.st.Meta.ListUsers()
	if err != nil {
		return nil, asError(err, "list users")
	}
	groups, err := l.st.Meta.ListGroups()
	if err != nil {
		return nil, asError(err, "list groups")
	}
	st := &Status{Store: l.st.Location().String(), Views: []ViewInfo{}, Locks: []LockInfo{}, Users: len(users), Groups: len(groups)}
	rec, err := l.st.Meta.LastCheck()
	switch {
	case err != nil:
		return nil, asError(err, "read the last fsck record")
	case !rec.At.IsZero():
		st.LastCheck = &CheckInfo{At: rec.At.UTC().Truncate(time.Second), Problems: rec.Problems, Unrepaired: rec.Unrepaired}
	}
	if st.Quotas, err = l.ShowQuota(ctx, ""); err != nil {
		return nil, err
	}
	// The data size is estimated from the usage counters, which every
	// change keeps up to date: walking blobs/ is left to status --du.
	st.Size.Meta = "badger"
	st.Size.LSMBytes, st.Size.VlogBytes = l.st.Meta.EngineSize()
	if es, ok, err := l.st.Meta.EtcdSize(); ok {
		st.Size.Meta = "etcd"
		if err != nil {
			l.log.Warn("status: size of the store on etcd", "err", err)
		}
		st.Size.EtcdKeys, st.Size.EtcdDBBytes, st.Size.EtcdDBInUse = es.Keys, es.DBBytes, es.DBInUse
	}
	// On a store several daemons serve, each tells of the others, so
	// that the one asked is not taken for the only one.
	if st.Daemons, err = l.st.Meta.Peers(); err != nil {
		l.log.Warn("status: list the daemons serving the store", "err", err)
	}
	for _, q := range st.Quotas {
		st.Size.DataBytes += q.Used.Bytes
	}
	if r := l.st.Blobs.Remote(); r != nil {
		st.Bucket = &BucketStatus{URL: l.st.Location().Bucket, Stats: r.Stats()}
	}
	if l.mount != nil {
		l.mount.fillStatus(st)
	}
	return st, nil
}

// audit records a change made through the admin operations, with the
// door "admin" (vfs.Admin.Record).
func (l *Local) audit(user string, zone shedfs.Zone, path, op string, bytes int64) {
	l.core.Admin(user).Record(zone, path, op, bytes)
}

// now is the time lifetimes are decided against.
func (l *Local) now() time.Time {
	if l.clock != nil {
		return l.clock()
	}
	return time.Now()
}
