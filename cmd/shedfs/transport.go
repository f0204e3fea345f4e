package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs/fusefs"
	"github.com/shedfs/shedfs/fuseuring"
)

// The kernel channels a view can be served over (--transport).
const (
	transportAuto  = "auto"
	transportURing = "uring"
	transportDev   = "dev"
)

// uringDepth and the payload buffers: see fuseuring.DefaultDepth and
// docs/performance.md ("FUSE over io_uring").
const uringDepth = fuseuring.DefaultDepth

// chooseTransport resolves --transport against what the kernel offers: the
// transport to use ("uring" or "dev") and, for auto on /dev/fuse, why.
// uring with the kernel's switch off is an error naming the switch; the
// daemon never turns it on itself.
func chooseTransport(flag string, enabled func() error) (string, string, error) {
	switch flag {
	case transportDev:
		return transportDev, "--transport dev", nil
	case transportURing:
		if err := enabled(); err != nil {
			return "", "", fmt.Errorf("--transport uring: %w", err)
		}
		return transportURing, "", nil
	case transportAuto, "":
		if err := enabled(); err != nil {
			why := "the kernel does not offer io_uring"
			if errors.Is(err, fuseuring.ErrDisabled) {
				why = fuseuring.ParamPath + " is off"
			}
			return transportDev, why, nil
		}
		return transportURing, "", nil
	}
	return "", "", fmt.Errorf("--transport: %q is not auto, uring or dev", flag)
}

// uringViews serves each view over FUSE io_uring (fusefs.Transport). A
// view whose rings cannot start stays on /dev/fuse, logged.
type uringViews struct {
	log *slog.Logger
	// requests and dev count the requests served over the rings and
	// over /dev/fuse; nil without --metrics.
	requests, dev prometheus.Counter
	views         atomic.Int64
	served        atomic.Uint64
}

// HandOverRefused implements fusefs.HandOverRefuser: the rings of a view
// are not handed over in a takeover.
func (u *uringViews) HandOverRefused() error {
	return errors.New("views served over FUSE io_uring cannot be taken over: serve with --transport dev to allow takeovers")
}

func (u *uringViews) Wrap(view string, raw fuse.RawFileSystem, mo *fuse.MountOptions) fuse.RawFileSystem {
	opts := fuseuring.Options{
		Depth:    uringDepth,
		MaxWrite: mo.MaxWrite,
		Logger:   u.log,
		Served: func() {
			u.served.Add(1)
			if u.requests != nil {
				u.requests.Inc()
			}
		},
	}
	if u.dev != nil {
		opts.Dev = u.dev.Inc
	}
	return fuseuring.Wrap(raw, mo, opts, func(t *fuseuring.Transport, err error) {
		if err != nil {
			u.log.Error("view served over /dev/fuse: io_uring did not start", "view", view, "err", err)
			return
		}
		u.views.Add(1)
		go func() {
			t.Wait()
			u.views.Add(-1)
		}()
	})
}

var _ fusefs.Transport = (*uringViews)(nil)

// devViews counts the requests of views served over /dev/fuse only
// (fusefs.Transport with --metrics and no io_uring).
type devViews struct{ dev prometheus.Counter }

func (d devViews) Wrap(_ string, raw fuse.RawFileSystem, _ *fuse.MountOptions) fuse.RawFileSystem {
	return fuseuring.CountDev(raw, d.dev.Inc)
}

// setTransport applies --transport to the FS options: it registers the
// per-transport metrics and returns the transport for shedfs status, which
// openServing says once in the log when the daemon is built (not before:
// a command that fails earlier says one line, its error).
// reg is nil without --metrics; enabled is fuseuring.Enabled but in tests.
func setTransport(flag string, log *slog.Logger, reg *prometheus.Registry, enabled func() error, opts *fusefs.Options) (string, error) {
	tr, why, err := chooseTransport(flag, enabled)
	if err != nil {
		return "", err
	}
	var u *uringViews
	if tr == transportURing {
		u = &uringViews{log: log}
		opts.Transport = u
	}
	if reg != nil {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_fuse_transport_requests_total",
			Help: "FUSE requests the views got, by transport: uring (FUSE over io_uring) or dev (/dev/fuse; a batch forget counts once per node).",
		}, []string{"transport"})
		if err := reg.Register(c); err != nil {
			return "", fmt.Errorf("metrics: %w", err)
		}
		if u != nil {
			u.requests, u.dev = c.WithLabelValues(transportURing), c.WithLabelValues(transportDev)
			if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "shedfs_fuse_uring_views",
				Help: "Views whose requests are served over io_uring.",
			}, func() float64 { return float64(u.views.Load()) })); err != nil {
				return "", fmt.Errorf("metrics: %w", err)
			}
		} else {
			c.WithLabelValues(transportURing)
			opts.Transport = devViews{dev: c.WithLabelValues(transportDev)}
		}
	}
	if tr == transportURing {
		return "io_uring", nil
	}
	return "/dev/fuse (" + why + ")", nil
}
