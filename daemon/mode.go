package daemon

import (
	"context"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// GetMode shows the owner, ownership mode and zone of path in user's view.
// The path is resolved the way the view would, from the store alone, so
// the admin sees what the user sees without any view being mounted.
func (l *Local) GetMode(ctx context.Context, user, path string) (*ModeInfo, error) {
	n, rel, err := l.resolve(user, path)
	if err != nil {
		return nil, err
	}
	info := modeInfo(user, rel, n)
	l.addContent(info, n)
	return info, nil
}

// SetMode is the admin's override of an entry's ownership: unlike
// user.shedfs.mode in a view, it does not ask who owns the entry. The new
// owner must still be someone who sees the zone (a member of the group,
// any user for share/), and ownership applies only in share/ and groups/.
func (l *Local) SetMode(ctx context.Context, user, path string, req ModeSetRequest) (*ModeInfo, error) {
	if req.Mode == nil && req.Owner == nil {
		return nil, errorf(CodeInvalid, "mode set: give a mode, an owner or both")
	}
	var mode shedfs.OwnMode
	if req.Mode != nil {
		m, err := shedfs.ParseOwnMode(*req.Mode)
		if err != nil {
			return nil, errorf(CodeInvalid, "invalid mode %q: use owner, group or owner_ro", *req.Mode)
		}
		mode = m
	}
	if req.Owner != nil {
		if err := ValidPrincipalName("owner", *req.Owner); err != nil {
			return nil, err
		}
	}
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, err
	}
	var setMode *shedfs.OwnMode
	if req.Mode != nil {
		setMode = &mode
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out, rel, err := l.core.Admin(user).SetOwnership(path, req.Owner, setMode)
	if err != nil {
		return nil, asError(err, "mode set "+path)
	}
	info := modeInfo(user, rel, out)
	l.log.Info("ownership changed by the admin", "user", user, "path", rel, "owner", info.Owner, "mode", info.Mode)
	return info, nil
}

// modeInfo describes an entry's ownership.
func modeInfo(user, rel string, n *shedfs.Inode) *ModeInfo {
	info := &ModeInfo{User: user, Path: rel, Type: typeName(n), Zone: n.Zone.Label(), Owner: n.Owner}
	if m := zones.EffectiveMode(n.Zone.Kind, n.OwnMode); m != shedfs.OwnModeNone {
		info.Mode = m.String()
	}
	return info
}

// typeName is the kind of an inode as ls would name it.
func typeName(n *shedfs.Inode) string {
	switch n.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFREG:
		return "file"
	case syscall.S_IFLNK:
		return "symlink"
	}
	return "special"
}

// resolve finds the inode at path in user's view by walking the store
// from the zone roots, as the view would: the private root, output/,
// uploads/, share/ and groups/<g> for the groups user is in. Symlinks are
// not followed (the path names the link itself) and ".." is refused, so a
// path can never leave the zone it names. A path the view does not show
// is "not found", whatever lies behind it, so the answer leaks nothing
// the user could not see. It returns the cleaned path as well.
func (l *Local) resolve(user, path string) (*shedfs.Inode, string, error) {
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, "", err
	}
	n, rel, err := l.core.Admin(user).Resolve(path)
	if err != nil {
		return nil, "", asError(err, "resolve "+path)
	}
	return n, rel, nil
}
