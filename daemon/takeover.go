package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// A takeover moves every view of a running daemon to a new one without
// unmounting any (shedfs serve --takeover; takeover.go in cmd/shedfs has
// the exchange): the old daemon stops serving its views, leaving them
// mounted, persists what its open files hold, and hands each view's
// FUSE connection with what its kernel holds (Handover); the new one
// adopts them before it serves anything else. Processes in the views see
// their requests wait meanwhile, nothing else.

// HandoverVersion is the version of Handover this build writes and reads.
const HandoverVersion = 1

// Handover is what a daemon hands the next: one entry per view, in the
// order of the descriptors that go with it.
type Handover struct {
	Version int          `json:"version"`
	Views   []HandedView `json:"views"`
}

// HandedView is one view handed over.
type HandedView struct {
	// Key is the view's name in the daemon: the user, or user@session.
	Key        string `json:"key"`
	Mountpoint string `json:"mountpoint"`
	Managed    bool   `json:"managed"`
	// State is what the views' transport needs (fusefs.Handover).
	State json.RawMessage `json:"state"`
}

// handingViews are Views whose views can be handed over and adopted
// (fusefs.FS).
type handingViews interface {
	AdoptViewState(user string, ss *metadata.Session, mountpoint string, opts vfs.ViewOptions, state json.RawMessage, dev int) (vfs.MountedView, error)
	// HandedOver ends the background work of views all handed over.
	HandedOver()
}

// handingView is a mounted view that can be handed over (fusefs.View).
type handingView interface {
	CanHandOver() error
	HandOverState() (json.RawMessage, int, error)
	Serve()
}

// CanHandOver says why the daemon's views cannot be handed over, nil when
// they can.
func (d *Daemon) CanHandOver() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.canHandOverLocked()
}

func (d *Daemon) canHandOverLocked() error {
	if _, ok := d.fs.(handingViews); !ok {
		return errors.New("these views cannot be handed over")
	}
	if d.stopped {
		return errors.New("the daemon is stopping")
	}
	for key, v := range d.views {
		hv, ok := v.mv.(handingView)
		if !ok {
			return fmt.Errorf("the view of %s cannot be handed over", key)
		}
		if err := hv.CanHandOver(); err != nil {
			return fmt.Errorf("view of %s: %w", key, err)
		}
	}
	return nil
}

// HandOver stops serving every view, leaving them mounted, closes the
// admin socket and persists what open files hold; it returns the
// handover and a descriptor per view, which the caller owns. The daemon
// serves nothing afterwards; the caller closes the store. When a view
// fails, the others are handed over all the same and so is a view whose
// connection it could stop reading though a request was still being
// served: the caller restarts in place with what it returned, and a view
// not in it (its connection could not be taken) is mounted afresh.
func (d *Daemon) HandOver(ctx context.Context) (*Handover, []int, error) {
	d.mu.Lock()
	if err := d.canHandOverLocked(); err != nil {
		d.mu.Unlock()
		return nil, nil, err
	}
	srv, views := d.stopLocked()
	for _, v := range views {
		// Its end is not an unmount from outside.
		v.closing.Store(true)
	}
	d.mu.Unlock()
	sort.Slice(views, func(i, j int) bool { return views[i].user < views[j].user })
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			d.log.Warn("admin socket shut down with requests in flight", "err", err)
		}
	}
	h := &Handover{Version: HandoverVersion}
	var fds []int
	var errs []error
	for _, v := range views {
		// Past a view that fails, the others are handed over all the
		// same: a failed takeover restarts the daemon in place, which
		// serves again only the views in h.
		state, dev, err := v.mv.(handingView).HandOverState()
		if err != nil {
			errs = append(errs, fmt.Errorf("hand over the view of %s: %w", v.user, err))
		}
		if dev >= 0 {
			h.Views = append(h.Views, HandedView{Key: v.user, Mountpoint: v.mountpoint, Managed: v.managed, State: state})
			fds = append(fds, dev)
		}
	}
	if len(errs) > 0 {
		return h, fds, errors.Join(errs...)
	}
	d.wg.Wait()
	d.fs.(handingViews).HandedOver()
	d.rate.close()
	return h, fds, nil
}

// Adopt takes over the views of h, with their descriptors, before Start:
// they are registered but serve only once ServeAdopted is called, so
// that the old daemon can still take them back until then. The first
// view that cannot be adopted fails it, unless lenient (a daemon
// restarted in place, which no other can take the views back from):
// then that view's connection is aborted (its processes get ENOTCONN,
// and Start clears the dead mount and mounts the view afresh) and the
// others are adopted.
func (d *Daemon) Adopt(h *Handover, fds []int, lenient bool) error {
	if h.Version != HandoverVersion {
		return fmt.Errorf("takeover: handover version %d, this build reads %d", h.Version, HandoverVersion)
	}
	if len(fds) != len(h.Views) {
		return fmt.Errorf("takeover: %d views but %d descriptors", len(h.Views), len(fds))
	}
	hv, ok := d.fs.(handingViews)
	if !ok {
		return errors.New("takeover: these views cannot be adopted")
	}
	if err := d.reloadSessions(); err != nil {
		return err
	}
	for i, v := range h.Views {
		err := d.adoptOne(hv, v, fds[i])
		if err != nil && !lenient {
			return err
		}
		if err != nil {
			// Aborted, not merely closed: a clone of the connection may
			// be left in the view that failed half way.
			d.log.Error("takeover: view let go, to be mounted afresh", "view", v.Key, "err", err)
			if conn, ok := fuseConnection(v.Mountpoint); ok {
				if err := abortConnection(conn); err != nil {
					d.log.Error("takeover: let go of a view", "view", v.Key, "err", err)
				}
			}
			unix.Close(fds[i])
		}
	}
	return nil
}

// adoptOne adopts one view.
func (d *Daemon) adoptOne(hv handingViews, v HandedView, dev int) error {
	user, id, _ := strings.Cut(v.Key, "@")
	u, err := d.cfg.Store.Meta.GetUser(user)
	if err != nil {
		return fmt.Errorf("takeover: view of %s: %w", v.Key, err)
	}
	opts := d.viewOptions(u)
	var ss *metadata.Session
	if id != "" {
		if ss, err = d.cfg.Store.Meta.GetSession(user, id); err != nil {
			return fmt.Errorf("takeover: view of %s: %w", v.Key, err)
		}
	}
	mv, err := hv.AdoptViewState(user, ss, v.Mountpoint, opts, v.State, dev)
	if err != nil {
		return fmt.Errorf("takeover: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.watchLocked(v.Key, v.Mountpoint, mv, v.Managed)
	if ss == nil {
		w.opts = opts
	} else {
		w.conn, _ = fuseConnection(v.Mountpoint)
	}
	d.adopted = append(d.adopted, w)
	return nil
}

// ServeAdopted starts serving the adopted views; Start follows, which
// mounts whatever else should be.
func (d *Daemon) ServeAdopted() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.adopted {
		v.mv.(handingView).Serve()
		d.log.Info("view taken over", "view", v.user, "mountpoint", v.mountpoint)
	}
}

// adoptedAt reports whether the view at path was adopted.
func (d *Daemon) adoptedAt(path string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.adopted {
		if v.mountpoint == path {
			return true
		}
	}
	return false
}
