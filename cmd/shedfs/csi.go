package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/csi"
)

// csiFlags are serve's flags for the Kubernetes CSI driver: one daemon
// per node serves the views and the CSI services on the same store.
func csiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "csi", Usage: "serve the Kubernetes CSI driver (identity, node, controller) on this endpoint, unix:///csi/csi.sock"},
		&cli.StringFlag{Name: "csi-name", Value: csi.DefaultName, Usage: "the CSI driver's name, as the CSIDriver object gives it"},
		&cli.StringFlag{Name: "csi-node-id", EnvVars: []string{"NODE_NAME"}, Usage: "this node's name for CSI (default: the host name)"},
	}
}

// startCSI serves the CSI driver when --csi asks for it, once the views
// are mounted; nil without --csi.
func startCSI(c *cli.Context, s *serving, log *slog.Logger) (*csi.Driver, error) {
	ep := c.String("csi")
	if ep == "" {
		return nil, nil
	}
	node := c.String("csi-node-id")
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("csi: node id: %w", err)
		}
		node = h
	}
	admin, ok := s.d.Admin().(csi.Admin)
	if !ok {
		return nil, fmt.Errorf("csi: the daemon's admin has no sessions")
	}
	loc := s.st.Location()
	d, err := csi.New(csi.Config{
		Name: c.String("csi-name"), Version: csiVersion(), NodeID: node,
		StateDir: filepath.Join(loc.StateDir(), "csi"), StoreDir: loc.BlobDir(),
		Admin: admin, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if err := d.Serve(ep); err != nil {
		return nil, err
	}
	return d, nil
}

// stopCSI stops answering kubelet before the views go.
func stopCSI(d *csi.Driver) {
	if d == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	d.Stop(ctx)
}

// csiVersion is the module version the binary was built from, "dev"
// for a plain go build.
func csiVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
