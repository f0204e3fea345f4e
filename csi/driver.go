// Package csi is the Kubernetes door of a serving daemon: the Container
// Storage Interface's Identity, Node and Controller services on a Unix
// socket (shedfs serve --csi).
//
// It holds no rule of its own. A volume is a view the daemon already
// serves under its mount root (a user's, or a session's), bind-mounted
// into the pod's target path; a session is opened and closed through the
// daemon's admin operations (daemon.SessionAdmin), exactly as shedfs
// session open/close does; quotas and capacities are what the views'
// statfs answers (the core's figures, as df shows them). What it keeps
// itself is which target paths it published and which volumes it made,
// in files of the store's state directory, so that an unpublish or a
// delete after a restart of the daemon undoes exactly what was done.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shedfs/shedfs/daemon"
)

// DefaultName is the driver's name, which the CSIDriver object, the
// StorageClass's provisioner and a pod's inline volume give.
const DefaultName = "csi.shedfs.io"

// TopologyKey is the topology segment a node reports: a store on a
// node's disk serves the volumes of that node only.
const TopologyKey = "topology.csi.shedfs.io/node"

// Admin is what the driver calls in the daemon: its admin operations
// (daemon.Local of a serving daemon), sessions included.
type Admin interface {
	daemon.Admin
	daemon.SessionAdmin
}

// Config is what a Driver serves.
type Config struct {
	// Name is the driver's name; empty: DefaultName.
	Name string
	// Version is reported by GetPluginInfo.
	Version string
	// NodeID names this node (kubelet's node name).
	NodeID string
	// StateDir holds the driver's records (the store's state directory
	// and "csi").
	StateDir string
	Admin    Admin
	// StoreDir is the directory whose file system GetCapacity reports
	// when no user is named.
	StoreDir string
	Logger   *slog.Logger
}

// Driver serves the CSI services.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer
	csipb.UnimplementedControllerServer

	cfg   Config
	log   *slog.Logger
	admin Admin
	st    *state

	// nodeMu runs one publish or unpublish at a time: each is a few
	// mount system calls and at most one session open or close, and
	// kubelet retries what fails.
	nodeMu sync.Mutex
	// ctrlMu runs one create or delete at a time, for the same reason.
	ctrlMu sync.Mutex

	srv *grpc.Server
	ln  net.Listener
}

// New prepares a driver; nothing listens before Serve.
func New(cfg Config) (*Driver, error) {
	if cfg.Admin == nil {
		return nil, errors.New("csi: no admin")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("csi: no node id")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := openState(cfg.StateDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, log: log.With("door", "csi"), admin: cfg.Admin, st: st}, nil
}

// ParseEndpoint reads a CSI endpoint, unix:///path or unix:/path (a
// bare path is taken as a Unix socket too), and returns the socket path.
func ParseEndpoint(ep string) (string, error) {
	if strings.HasPrefix(ep, "/") {
		return ep, nil
	}
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "unix" {
		return "", fmt.Errorf("csi endpoint %q: give unix:///path/to/csi.sock", ep)
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if p == "" || u.Host != "" {
		return "", fmt.Errorf("csi endpoint %q: give unix:///path/to/csi.sock", ep)
	}
	return p, nil
}

// Serve listens on endpoint and serves until Stop. A socket file left by
// a previous run is replaced.
func (d *Driver) Serve(endpoint string) error {
	path, err := ParseEndpoint(endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("csi endpoint: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("csi endpoint: remove a stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("csi endpoint: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("csi endpoint: %w", err)
	}
	d.ln = ln
	d.srv = grpc.NewServer(grpc.UnaryInterceptor(d.logCall))
	csipb.RegisterIdentityServer(d.srv, d)
	csipb.RegisterNodeServer(d.srv, d)
	csipb.RegisterControllerServer(d.srv, d)
	go func() {
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			d.log.Error("csi server stopped", "err", err)
		}
	}()
	d.log.Info("csi listening", "endpoint", path, "driver", d.cfg.Name, "node", d.cfg.NodeID)
	return nil
}

// Stop lets calls in flight finish, up to ctx, and closes the socket.
func (d *Driver) Stop(ctx context.Context) {
	if d.srv == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		d.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		d.srv.Stop()
	}
}

// logCall logs every call that fails, and each one that changes
// something.
func (d *Driver) logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	switch {
	case err != nil:
		d.log.Warn("csi call failed", "method", method, "code", status.Code(err).String(), "err", status.Convert(err).Message(), "took", time.Since(start))
	case strings.Contains(method, "Publish") || strings.Contains(method, "CreateVolume") || strings.Contains(method, "DeleteVolume"):
		d.log.Info("csi call", "method", method, "took", time.Since(start))
	}
	return resp, err
}

// grpcError turns an error of the daemon (an *daemon.Error) or of an
// attribute into a gRPC status with the matching code.
func grpcError(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ae *attrError
	if errors.As(err, &ae) {
		return status.Error(codes.InvalidArgument, ae.msg)
	}
	var de *daemon.Error
	if errors.As(err, &de) {
		c := codes.Internal
		switch de.Code {
		case daemon.CodeNotFound:
			c = codes.NotFound
		case daemon.CodeInvalid:
			c = codes.InvalidArgument
		case daemon.CodeExists:
			c = codes.AlreadyExists
		case daemon.CodeBusy:
			c = codes.FailedPrecondition
		case daemon.CodeQuota, daemon.CodeNoSpace:
			c = codes.ResourceExhausted
		case daemon.CodeForbidden:
			c = codes.PermissionDenied
		}
		return status.Errorf(c, "%s: %s", what, de.Message)
	}
	return status.Errorf(codes.Internal, "%s: %v", what, err)
}

func isCode(err error, code string) bool {
	var de *daemon.Error
	return errors.As(err, &de) && de.Code == code
}
