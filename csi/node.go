package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shedfs/shedfs/daemon"
)

// NodeGetInfo names the node and its topology segment.
func (d *Driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{
		NodeId:             d.cfg.NodeID,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{TopologyKey: d.cfg.NodeID}},
	}, nil
}

// NodeGetCapabilities: volume stats (the holder's quota), and several
// writers of one volume on the node. No staging: a view needs none.
func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{
		rpc(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS),
		rpc(csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
	}}, nil
}

// supportedModes are the access modes of a view: any number of writers
// on the node whose store holds it.
var supportedModes = map[csipb.VolumeCapability_AccessMode_Mode]bool{
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

// mountOptions are the mount flags a volume capability may ask for.
var mountOptions = map[string]uintptr{
	"ro": unix.MS_RDONLY, "rw": 0, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV,
	"noexec": unix.MS_NOEXEC, "noatime": unix.MS_NOATIME, "relatime": unix.MS_RELATIME,
}

// checkCapability refuses a capability a view cannot honour, and returns
// the mount flags it asks for.
func checkCapability(c *csipb.VolumeCapability) (uintptr, error) {
	if c == nil {
		return 0, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if c.GetBlock() != nil {
		return 0, status.Error(codes.InvalidArgument, "block access is not supported: a shedfs volume is a directory (access type mount)")
	}
	m := c.GetMount()
	if m == nil {
		return 0, status.Error(codes.InvalidArgument, "access type mount is required")
	}
	// fsType is not looked at: a view is what it is, and kubelet or a
	// provisioner may fill in a default (ext4) nobody chose.
	var flags uintptr
	for _, o := range m.GetMountFlags() {
		f, ok := mountOptions[o]
		if !ok {
			return 0, status.Errorf(codes.InvalidArgument, "mount flag %q is not supported (ro, rw, nosuid, nodev, noexec, noatime, relatime)", o)
		}
		flags |= f
	}
	if mode := c.GetAccessMode().GetMode(); !supportedModes[mode] {
		return 0, status.Errorf(codes.InvalidArgument, "access mode %s is not supported: a volume is served by one node's daemon", mode)
	}
	return flags, nil
}

// NodePublishVolume bind-mounts the view the volume names into the
// target path: a user's main view, an open session's, or the view of a
// session it opens now (newSession), which NodeUnpublishVolume closes.
// Publishing again what is published is a success; the publication is
// recorded before anything is opened, so that an unpublish after a crash
// or a restart closes what this one opened.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	vol, target := req.GetVolumeId(), req.GetTargetPath()
	if vol == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	if !filepath.IsAbs(target) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q is not absolute", target)
	}
	target = filepath.Clean(target)
	flags, err := checkCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	attrs, err := parseVolumeAttrs(vol, req.GetVolumeContext())
	if err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	ro := req.GetReadonly() || attrs.ReadOnly || flags&unix.MS_RDONLY != 0 ||
		mode == csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	single := mode == csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER

	d.nodeMu.Lock()
	defer d.nodeMu.Unlock()
	pub, err := d.st.publication(vol, target)
	if err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	if pub != nil {
		mounted, alive, err := mountState(target)
		if err != nil {
			return nil, grpcError(err, "target "+target)
		}
		if mounted && alive {
			if pub.ReadOnly != ro {
				return nil, status.Errorf(codes.AlreadyExists, "volume %s is published at %s with readOnly=%v", vol, target, pub.ReadOnly)
			}
			return &csipb.NodePublishVolumeResponse{}, nil
		}
		// Published half-way, or its view died with a previous daemon:
		// publish again what the record says.
	} else if mounted, _, err := mountState(target); err != nil {
		return nil, grpcError(err, "target "+target)
	} else if mounted {
		return nil, status.Errorf(codes.AlreadyExists, "target %s has another volume mounted", target)
	}
	pubs, err := d.st.publications()
	if err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	for _, p := range pubs {
		if p.VolumeID == vol && p.Target != target && (single || p.SingleWriter) {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published at %s for a single writer", vol, p.Target)
		}
	}
	fresh := pub == nil
	if fresh {
		pub = &publication{VolumeID: vol, Target: target, User: attrs.User, Session: attrs.Session,
			Owned: attrs.NewSession, Keep: attrs.Keep, ReadOnly: ro, SingleWriter: single}
		if attrs.NewSession {
			pub.Session = publishSessionID(vol, target)
		}
		if err := d.st.savePublication(pub); err != nil {
			return nil, grpcError(err, "volume "+vol)
		}
	}
	src, err := d.viewOf(ctx, pub, attrs)
	if err != nil {
		if fresh && (!pub.Owned || refusedBeforeOpen(err)) {
			// Nothing was opened that an unpublish must close.
			_ = d.st.dropPublication(vol, target)
		}
		return nil, err
	}
	if err := bindView(src, target, ro, flags); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", vol, err)
	}
	d.log.Info("volume published", "volume", vol, "target", target, "user", pub.User, "session", pub.Session, "new_session", pub.Owned, "read_only", ro)
	return &csipb.NodePublishVolumeResponse{}, nil
}

// refusedBeforeOpen reports whether a publish failed before a session
// could be open: a missing user, a bad attribute, no room.
func refusedBeforeOpen(err error) bool {
	switch status.Code(err) {
	case codes.NotFound, codes.InvalidArgument, codes.ResourceExhausted, codes.AlreadyExists, codes.FailedPrecondition:
		return true
	}
	return false
}

// viewOf returns the mountpoint of the view a publication binds,
// opening its session first when the publication owns one.
func (d *Driver) viewOf(ctx context.Context, pub *publication, attrs *volumeAttrs) (string, error) {
	if _, err := d.admin.ShowUser(ctx, pub.User); err != nil {
		return "", grpcError(err, "user "+pub.User)
	}
	var mnt string
	switch {
	case pub.Owned:
		info, err := d.admin.OpenSession(ctx, daemon.SessionOpenRequest{User: pub.User, ID: pub.Session, TTL: attrs.TTL, Quota: attrs.Quota})
		if isCode(err, daemon.CodeExists) {
			// Opened by this publication before a failure or a
			// restart: the same session.
			info, err = d.openSession(ctx, pub.User, pub.Session)
		}
		if err != nil {
			return "", grpcError(err, "open session "+pub.Session+" of "+pub.User)
		}
		mnt = info.Mountpoint
	case pub.Session != "":
		info, err := d.openSession(ctx, pub.User, pub.Session)
		if err != nil {
			return "", err
		}
		mnt = info.Mountpoint
	default:
		u, err := d.admin.ShowUser(ctx, pub.User)
		if err != nil {
			return "", grpcError(err, "user "+pub.User)
		}
		mnt = u.View
	}
	if mnt == "" {
		return "", status.Errorf(codes.Unavailable, "no view of %s is mounted: the daemon serves no mount root", pub.User)
	}
	return mnt, nil
}

// openSession finds an open session; a session that is not open is
// NotFound, or FailedPrecondition when it was a volume this controller
// made (closed since, by its TTL or by hand).
func (d *Driver) openSession(ctx context.Context, user, id string) (*daemon.SessionInfo, error) {
	list, err := d.admin.ListSessions(ctx, user)
	if err != nil {
		return nil, grpcError(err, "sessions of "+user)
	}
	for i := range list {
		if list[i].ID == id {
			return &list[i], nil
		}
	}
	if rec, err := d.st.volume(volumeID(user, id)); err == nil && rec != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "session %s of %s is closed (its ttl passed, or it was closed by hand)", id, user)
	}
	return nil, status.Errorf(codes.NotFound, "no open session %s of %s", id, user)
}

// bindView bind-mounts the view at src onto target (made if missing),
// then remounts the bind nosuid and nodev, read-only with ro, with the
// extra flags the capability asked for. A dead mount left at target by a
// previous daemon goes first.
func bindView(src, target string, ro bool, flags uintptr) error {
	if mounted, alive, err := mountState(target); err != nil {
		return err
	} else if mounted && !alive {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("clear a dead mount at %s: %w", target, err)
		}
	}
	if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("target %s: %w", target, err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s to %s: %w", src, target, err)
	}
	flags |= unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV
	if ro {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("remount %s: %w", target, err)
	}
	return nil
}

// NodeUnpublishVolume unmounts the target path and removes it; when the
// publication opened a session, it closes it (to the trash, or kept).
// Unpublishing what is not published is a success.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	vol, target := req.GetVolumeId(), req.GetTargetPath()
	if vol == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	target = filepath.Clean(target)
	d.nodeMu.Lock()
	defer d.nodeMu.Unlock()
	pub, err := d.st.publication(vol, target)
	if err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	if err := unmountTarget(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", vol, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "volume %s: remove target: %v", vol, err)
	}
	if pub != nil && pub.Owned {
		if err := d.closeSession(ctx, pub.User, pub.Session, pub.Keep); err != nil {
			return nil, err
		}
	}
	if err := d.st.dropPublication(vol, target); err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	if pub != nil {
		d.log.Info("volume unpublished", "volume", vol, "target", target, "closed_session", pub.Owned)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// closeGrace is how long an unpublish waits for the files of the
// session to be let go before it forces the close: kubelet unpublishes
// once the pod's containers are gone, and what they held open is being
// released.
const closeGrace = 5 * time.Second

// closeSession closes a session through the admin API's close (the view
// goes, then the scratch to the trash or home/sessions/ID). A session
// already closed is a success.
func (d *Driver) closeSession(ctx context.Context, user, id string, keep bool) error {
	deadline := time.Now().Add(closeGrace)
	for {
		force := time.Now().After(deadline)
		_, err := d.admin.CloseSession(ctx, daemon.SessionCloseRequest{User: user, ID: id, Keep: keep, Force: force})
		switch {
		case err == nil, isCode(err, daemon.CodeNotFound):
			return nil
		case isCode(err, daemon.CodeBusy) && !force:
			select {
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		return grpcError(err, "close session "+id+" of "+user)
	}
}

// unmountTarget unmounts whatever is mounted at target (a bind can be
// stacked by a retried publish), a dead mount included.
func unmountTarget(target string) error {
	for range 8 {
		mounted, _, err := mountState(target)
		if err != nil {
			return err
		}
		if !mounted {
			return nil
		}
		if err := unix.Unmount(target, 0); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", target)
}

// NodeGetVolumeStats reports the figures of the view at the volume path
// as its statfs gives them, which is what df shows in it: the quota of
// the view's holder (the tighter of a session's and its user's), bytes
// and inodes. A view no longer served (its daemon restarted) is
// FailedPrecondition.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	vol, path := req.GetVolumeId(), req.GetVolumePath()
	if vol == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	pubs, err := d.st.publications()
	if err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	known, here := false, false
	for _, p := range pubs {
		if p.VolumeID == vol {
			known = true
			here = here || p.Target == filepath.Clean(path)
		}
	}
	if !known {
		return nil, status.Errorf(codes.NotFound, "volume %s is not published on this node", vol)
	}
	if !here {
		return nil, status.Errorf(codes.NotFound, "volume %s is not published at %s", vol, path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, status.Errorf(codes.NotFound, "volume path %s: %v", path, err)
		}
		return nil, status.Errorf(codes.FailedPrecondition, "the view at %s is not served: %v (a previous daemon served it: restart the pod)", path, err)
	}
	bsize := st.Frsize
	if bsize == 0 {
		bsize = st.Bsize
	}
	total, free, avail := int64(st.Blocks)*bsize, int64(st.Bfree)*bsize, int64(st.Bavail)*bsize
	return &csipb.NodeGetVolumeStatsResponse{
		Usage: []*csipb.VolumeUsage{
			{Unit: csipb.VolumeUsage_BYTES, Total: total, Used: total - free, Available: avail},
			{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Used: int64(st.Files - st.Ffree), Available: int64(st.Ffree)},
		},
	}, nil
}

// mountState says whether path is a mount point in this mount namespace
// (from /proc/self/mountinfo) and, if so, whether it answers (a FUSE
// mount whose daemon went away fails with ENOTCONN).
func mountState(path string) (mounted, alive bool, err error) {
	if mounted, err = daemon.MountedAt(path); err != nil || !mounted {
		return false, false, err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return true, false, nil
	}
	return true, true, nil
}
