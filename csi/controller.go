package csi

import (
	"context"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shedfs/shedfs/daemon"
)

// ControllerGetCapabilities: volumes are made and deleted (sessions),
// listed, and the capacity of a user is known. There is nothing to
// attach (ControllerPublish), no snapshot, clone or expansion yet.
func (d *Driver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	rpc := func(t csipb.ControllerServiceCapability_RPC_Type) *csipb.ControllerServiceCapability {
		return &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}}}
	}
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: []*csipb.ControllerServiceCapability{
		rpc(csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		rpc(csipb.ControllerServiceCapability_RPC_LIST_VOLUMES),
		rpc(csipb.ControllerServiceCapability_RPC_GET_CAPACITY),
		rpc(csipb.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
	}}, nil
}

// CreateVolume makes a workspace: a persistent session of the
// StorageClass's user (parameter user, optional ttl), whose quota is the
// requested capacity, opened through the admin API's session open; its
// id is USER@ID. The same name again is the same volume.
func (d *Driver) CreateVolume(ctx context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume name is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range req.GetVolumeCapabilities() {
		if _, err := checkCapability(c); err != nil {
			return nil, err
		}
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "a volume from a snapshot or another volume is not supported")
	}
	if req.GetMutableParameters() != nil {
		return nil, status.Error(codes.InvalidArgument, "mutable parameters (volume attribute classes) are not supported")
	}
	p, err := parseCreateParams(req.GetParameters())
	if err != nil {
		return nil, grpcError(err, "volume "+name)
	}
	capacity := req.GetCapacityRange().GetRequiredBytes()
	limit := req.GetCapacityRange().GetLimitBytes()
	if capacity < 0 || limit < 0 || limit > 0 && capacity > limit {
		return nil, status.Errorf(codes.OutOfRange, "capacity range %d..%d is not a range", capacity, limit)
	}
	if capacity == 0 {
		capacity = limit
	}
	rec := &volumeRecord{Name: name, User: p.User, Session: sessionIDFor(name), Capacity: capacity, Keep: p.Keep, TTL: p.TTL}

	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	old, err := d.st.volume(rec.ID())
	if err != nil {
		return nil, grpcError(err, "volume "+name)
	}
	if old != nil {
		if old.Name != name || old.Capacity != capacity || old.Keep != p.Keep || old.TTL != p.TTL {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with another capacity or parameters (%d bytes)", name, old.Capacity)
		}
		if _, err := d.openSession(ctx, p.User, rec.Session); err == nil {
			return d.created(rec), nil
		}
		// Recorded but not opened: a previous try failed half-way.
	}
	if err := d.st.saveVolume(rec); err != nil {
		return nil, grpcError(err, "volume "+name)
	}
	_, err = d.admin.OpenSession(ctx, daemon.SessionOpenRequest{User: p.User, ID: rec.Session, TTL: p.TTL, Quota: daemon.Amount{Bytes: capacity}})
	if err != nil {
		_ = d.st.dropVolume(rec.ID())
		if isCode(err, daemon.CodeExists) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s: session %s of %s is open, or kept in home/sessions, but not as this volume", name, rec.Session, p.User)
		}
		return nil, grpcError(err, "volume "+name)
	}
	d.log.Info("volume created", "volume", rec.ID(), "name", name, "capacity", capacity, "ttl", p.TTL, "keep", p.Keep)
	return d.created(rec), nil
}

func (d *Driver) created(rec *volumeRecord) *csipb.CreateVolumeResponse {
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{
		VolumeId:      rec.ID(),
		CapacityBytes: rec.Capacity,
		VolumeContext: map[string]string{AttrUser: rec.User, AttrSession: rec.Session},
		AccessibleTopology: []*csipb.Topology{
			{Segments: map[string]string{TopologyKey: d.cfg.NodeID}},
		},
	}}
}

// DeleteVolume closes the session of a volume CreateVolume made, to the
// trash or kept (StorageClass parameter onDelete), through the admin
// API's session close; refused while the volume's files are open. A
// volume it did not make (a static PV naming a session) is left alone,
// and an unknown one is already gone.
func (d *Driver) DeleteVolume(ctx context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	vol := req.GetVolumeId()
	if vol == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	rec, err := d.st.volume(vol)
	if err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	if rec == nil {
		return &csipb.DeleteVolumeResponse{}, nil
	}
	_, err = d.admin.CloseSession(ctx, daemon.SessionCloseRequest{User: rec.User, ID: rec.Session, Keep: rec.Keep})
	switch {
	case isCode(err, daemon.CodeBusy):
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is in use: %v", vol, err)
	case err != nil && !isCode(err, daemon.CodeNotFound):
		return nil, grpcError(err, "volume "+vol)
	}
	if err := d.st.dropVolume(vol); err != nil {
		return nil, grpcError(err, "volume "+vol)
	}
	d.log.Info("volume deleted", "volume", vol, "keep", rec.Keep)
	return &csipb.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms the capabilities a view honours,
// for a volume that exists: one CreateVolume made, an open session
// (USER@ID), or a user's view named by the volume's attributes.
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	vol := req.GetVolumeId()
	if vol == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	if err := d.volumeExists(ctx, vol, req.GetVolumeContext()); err != nil {
		return nil, err
	}
	for _, c := range req.GetVolumeCapabilities() {
		if _, err := checkCapability(c); err != nil {
			return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
		}
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (d *Driver) volumeExists(ctx context.Context, vol string, attrs map[string]string) error {
	if rec, err := d.st.volume(vol); err != nil {
		return grpcError(err, "volume "+vol)
	} else if rec != nil {
		return nil
	}
	a, err := parseVolumeAttrs(vol, attrs)
	if err != nil {
		return status.Errorf(codes.NotFound, "no volume %s", vol)
	}
	if a.Session != "" {
		_, err := d.openSession(ctx, a.User, a.Session)
		return err
	}
	if _, err := d.admin.ShowUser(ctx, a.User); err != nil {
		return grpcError(err, "volume "+vol)
	}
	return nil
}

// listToken starts every token ListVolumes hands out: what follows is
// the last volume id of the previous page, so that a page is right even
// when volumes came or went in between.
const listToken = "after:"

// ListVolumes lists the volumes CreateVolume made, by id.
func (d *Driver) ListVolumes(ctx context.Context, req *csipb.ListVolumesRequest) (*csipb.ListVolumesResponse, error) {
	after := ""
	if t := req.GetStartingToken(); t != "" {
		var ok bool
		if after, ok = strings.CutPrefix(t, listToken); !ok {
			return nil, status.Errorf(codes.Aborted, "starting token %q was not given by ListVolumes", t)
		}
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max_entries must not be negative")
	}
	list, err := d.st.volumeList()
	if err != nil {
		return nil, grpcError(err, "list volumes")
	}
	resp := &csipb.ListVolumesResponse{}
	for i := range list {
		rec := &list[i]
		if rec.ID() <= after {
			continue
		}
		if max := int(req.GetMaxEntries()); max > 0 && len(resp.Entries) == max {
			resp.NextToken = listToken + resp.Entries[max-1].Volume.VolumeId
			break
		}
		resp.Entries = append(resp.Entries, &csipb.ListVolumesResponse_Entry{Volume: d.created(rec).Volume})
	}
	return resp, nil
}

// GetCapacity is the room a new volume of the StorageClass's user can
// have: what the user's view answers to statfs (its quota left, or the
// disk's free space for a user without one). Without a user, the free
// space of the store's file system.
func (d *Driver) GetCapacity(ctx context.Context, req *csipb.GetCapacityRequest) (*csipb.GetCapacityResponse, error) {
	for _, c := range req.GetVolumeCapabilities() {
		if _, err := checkCapability(c); err != nil {
			return &csipb.GetCapacityResponse{}, nil
		}
	}
	if t := req.GetAccessibleTopology(); t != nil {
		if n, ok := t.GetSegments()[TopologyKey]; ok && n != d.cfg.NodeID {
			return &csipb.GetCapacityResponse{}, nil
		}
	}
	path := d.cfg.StoreDir
	if user := req.GetParameters()[ParamUser]; user != "" {
		u, err := d.admin.ShowUser(ctx, user)
		if err != nil {
			return nil, grpcError(err, "user "+user)
		}
		if u.View == "" {
			return nil, status.Errorf(codes.Unavailable, "no view of %s is mounted: the daemon serves no mount root", user)
		}
		path = u.View
	}
	if path == "" {
		return &csipb.GetCapacityResponse{}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "capacity: statfs %s: %v", path, err)
	}
	bsize := st.Frsize
	if bsize == 0 {
		bsize = st.Bsize
	}
	return &csipb.GetCapacityResponse{AvailableCapacity: int64(st.Bavail) * bsize}, nil
}
