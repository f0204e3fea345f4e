package daemon

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// noViews is the Views of a daemon built without a transport (tests of
// the admin API): it mounts nothing and holds nothing open.
type noViews struct{}

var errNoViews = errors.New("this daemon serves no views")

func (noViews) MountView(string, string, vfs.ViewOptions) (vfs.MountedView, error) {
	return nil, errNoViews
}

func (noViews) MountSessionView(*metadata.Session, string, vfs.ViewOptions) (vfs.MountedView, error) {
	return nil, errNoViews
}

func (noViews) OpenFiles() int                          { return 0 }
func (noViews) OpenSessions() int                       { return 0 }
func (noViews) Requests() uint64                        { return 0 }
func (noViews) Foreign(metadata.Change)                 {}
func (noViews) StoreCollector(int) prometheus.Collector { return noCollector{} }
func (noViews) Shutdown()                               {}

// noCollector collects nothing.
type noCollector struct{}

func (noCollector) Describe(chan<- *prometheus.Desc) {}
func (noCollector) Collect(chan<- prometheus.Metric) {}
