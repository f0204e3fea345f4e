package main

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs/fusefs"
	"github.com/shedfs/shedfs/fuseuring"
)

func TestChooseTransport(t *testing.T) {
	on := func() error { return nil }
	off := func() error { return fuseuring.ErrDisabled }
	none := func() error { return fuseuring.ErrUnsupported }
	for _, c := range []struct {
		flag    string
		enabled func() error
		want    string
		wantErr bool
	}{
		{"auto", on, "uring", false},
		{"auto", off, "dev", false},
		{"auto", none, "dev", false},
		{"uring", on, "uring", false},
		{"uring", off, "", true},
		{"uring", none, "", true},
		{"dev", on, "dev", false},
		{"fast", on, "", true},
	} {
		got, _, err := chooseTransport(c.flag, c.enabled)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: %q, %v", c.flag, got, err)
		}
		if c.flag == "uring" && err != nil && !strings.Contains(err.Error(), fuseuring.ParamPath) && errors.Is(err, fuseuring.ErrDisabled) {
			t.Errorf("uring refused without naming %s: %v", fuseuring.ParamPath, err)
		}
	}
}

// TestSetTransportWithoutMetrics: io_uring views without --metrics (a nil
// registry) start; it used to dereference the nil registry.
func TestSetTransportWithoutMetrics(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, reg := range []*prometheus.Registry{nil, prometheus.NewRegistry()} {
		var opts fusefs.Options
		got, err := setTransport("uring", log, reg, func() error { return nil }, &opts)
		if err != nil || got != "io_uring" || opts.Transport == nil {
			t.Errorf("registry %v: %q, %v, transport %v", reg != nil, got, err, opts.Transport)
		}
	}
}

// TestSetTransportDevCounts: views on /dev/fuse are counted too, with
// --metrics (transport="dev"), and left unwrapped without.
func TestSetTransportDevCounts(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var opts fusefs.Options
	if _, err := setTransport("dev", log, prometheus.NewRegistry(), func() error { return nil }, &opts); err != nil || opts.Transport == nil {
		t.Errorf("dev with metrics: %v, transport %v", err, opts.Transport)
	}
	opts = fusefs.Options{}
	if _, err := setTransport("dev", log, nil, func() error { return nil }, &opts); err != nil || opts.Transport != nil {
		t.Errorf("dev without metrics: %v, transport %v", err, opts.Transport)
	}
}
