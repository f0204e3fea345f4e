package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A stop drains: each view is unmounted as soon as nothing uses it, and
// one still in use (a process with a file open in it or its working
// directory there, or a container that bind-mounted it) keeps serving
// until it is let go or the stop's deadline passes. Meanwhile the daemon
// says what it waits for, which views and which processes hold them, as
// far as /proc tells. At the deadline the views still in use are
// detached lazily and their connections aborted, so that the daemon
// exits: their holders get ENOTCONN, as they would when it exits anyway.

const (
	// drainPoll is how often a busy view's unmount is tried again.
	drainPoll = 200 * time.Millisecond
	// drainFirstReport is when a stop first says what it waits for (a
	// view left idle unmounts well before), drainReport how often it
	// says so again.
	drainFirstReport = 500 * time.Millisecond
	drainReport      = 5 * time.Second
	// drainAbortWait bounds the wait for an aborted view to stop.
	drainAbortWait = 5 * time.Second
	// holdersTimeout bounds the look through /proc (a stat of a file of
	// another, hung FUSE file system would block it).
	holdersTimeout = 2 * time.Second
	// maxHolders is how many holders one log line names.
	maxHolders = 8
)

// draining is one view a stop waits for.
type draining struct {
	v    *view
	conn int // the FUSE connection, 0 when unknown
	dev  uint64
}

// drain unmounts views, waiting for those in use until ctx ends, then
// detaches and aborts the rest.
func (d *Daemon) drain(ctx context.Context, views []*view) error {
	all := make([]*draining, 0, len(views))
	for _, v := range views {
		dr := &draining{v: v, conn: v.conn}
		// Found before any unmount takes the mount out of the table.
		if dr.conn == 0 {
			dr.conn, _ = fuseConnection(v.mountpoint)
		}
		if dr.conn != 0 {
			dr.dev = unix.Mkdev(0, uint32(dr.conn))
		}
		v.closing.Store(true)
		all = append(all, dr)
		go d.unmountWhenIdle(ctx, v)
	}
	start := time.Now()
	nextReport := start.Add(drainFirstReport)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := all[:0:0]
		for _, dr := range all {
			select {
			case <-dr.v.done:
				d.forget(dr.v)
			default:
				pending = append(pending, dr)
			}
		}
		all = pending
		if len(all) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return d.abortDrain(all, time.Since(start))
		case <-tick.C:
		}
		if time.Now().After(nextReport) {
			for _, dr := range all {
				d.log.Warn("stopping: view still in use, waiting", "user", dr.v.user, "mountpoint", dr.v.mountpoint,
					"held_by", describeHolders(dr), "waited", time.Since(start).Round(time.Second).String(), "deadline_in", untilDeadline(ctx))
			}
			nextReport = time.Now().Add(drainReport)
		}
	}
}

// unmountWhenIdle tries to unmount v until it succeeds, v stops serving,
// or ctx ends. An unmount that succeeds while a mount elsewhere (a
// container's bind mount) still holds the connection returns only once
// that one goes too.
func (d *Daemon) unmountWhenIdle(ctx context.Context, v *view) {
	for {
		if err := v.mv.Unmount(); err == nil {
			return
		}
		select {
		case <-v.done:
			return
		case <-ctx.Done():
			return
		case <-time.After(drainPoll):
		}
	}
}

// forget drops a view that stopped serving from the daemon's set.
func (d *Daemon) forget(v *view) {
	d.mu.Lock()
	if d.views[v.user] == v {
		delete(d.views, v.user)
	}
	d.mu.Unlock()
	d.log.Info("view unmounted", "user", v.user, "mountpoint", v.mountpoint)
}

// abortDrain ends the views still in use at the deadline: detached from
// the namespace (a lazy unmount), their connections aborted, and waits a
// little for each to stop serving.
func (d *Daemon) abortDrain(left []*draining, waited time.Duration) error {
	var errs []error
	for _, dr := range left {
		v := dr.v
		d.log.Warn("stop timeout: detaching a view still in use; its holders get ENOTCONN", "user", v.user, "mountpoint", v.mountpoint,
			"held_by", describeHolders(dr), "waited", waited.Round(time.Second).String())
		if err := unix.Unmount(v.mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("detach view of %s: %w", v.user, err))
		}
		if dr.conn == 0 {
			errs = append(errs, fmt.Errorf("view of %s at %s: no FUSE connection known to abort", v.user, v.mountpoint))
			continue
		}
		if err := abortConnection(dr.conn); err != nil {
			errs = append(errs, fmt.Errorf("view of %s: %w", v.user, err))
		}
	}
	timeout := time.After(drainAbortWait)
	for _, dr := range left {
		select {
		case <-dr.v.done:
			d.forget(dr.v)
		case <-timeout:
			errs = append(errs, fmt.Errorf("view of %s at %s still serving after its connection was aborted", dr.v.user, dr.v.mountpoint))
		}
	}
	return errors.Join(errs...)
}

func untilDeadline(ctx context.Context) string {
	dl, ok := ctx.Deadline()
	if !ok {
		return "none"
	}
	return time.Until(dl).Round(time.Second).String()
}

// describeHolders names what holds a view, from /proc, on one line; the
// look is bounded in time.
func describeHolders(dr *draining) string {
	if dr.dev == 0 {
		return "unknown (no FUSE connection found)"
	}
	ch := make(chan []string, 1)
	go func() { ch <- viewHolders(dr.dev, dr.v.mountpoint) }()
	select {
	case hs := <-ch:
		if len(hs) == 0 {
			return "nothing /proc shows (a process of another PID namespace, or a request under way)"
		}
		if len(hs) > maxHolders {
			hs = append(hs[:maxHolders:maxHolders], fmt.Sprintf("and %d more", len(hs)-maxHolders))
		}
		return strings.Join(hs, "; ")
	case <-time.After(holdersTimeout):
		return "unknown (/proc did not answer in time)"
	}
}

// viewHolders lists the processes /proc shows holding the file system of
// device dev (a view mounted at mnt): open files, working or root
// directories on it, and mounts of it elsewhere (a container's bind
// mount, in this namespace or another). The daemon itself is left out.
func viewHolders(dev uint64, mnt string) []string {
	self := os.Getpid()
	ownNS, _ := os.Readlink("/proc/self/ns/mnt")
	seenNS := map[string]bool{}
	var out []string
	// Other mounts of the same connection in this namespace.
	for _, at := range mountsOfDevice("/proc/self/mountinfo", dev) {
		if at != mnt {
			out = append(out, "also mounted at "+at)
		}
	}
	seenNS[ownNS] = true
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return append(out, "unknown: "+err.Error())
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		var what []string
		if onDevice(filepath.Join(dir, "cwd"), dev) {
			what = append(what, "working directory")
		}
		if onDevice(filepath.Join(dir, "root"), dev) {
			what = append(what, "root directory")
		}
		if files := openOnDevice(dir, dev); len(files) > 0 {
			w := "open " + files[0]
			if len(files) > 1 {
				w += fmt.Sprintf(" and %d more files", len(files)-1)
			}
			what = append(what, w)
		}
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "mnt")); err == nil && !seenNS[ns] {
			seenNS[ns] = true
			for _, at := range mountsOfDevice(filepath.Join(dir, "mountinfo"), dev) {
				what = append(what, "its mount namespace mounts the view at "+at)
			}
		}
		if len(what) > 0 {
			out = append(out, fmt.Sprintf("pid %d (%s): %s", pid, comm(dir), strings.Join(what, ", ")))
		}
	}
	return out
}

// onDevice reports whether path (a /proc link) leads to a file on dev.
func onDevice(path string, dev uint64) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Dev == dev
}

// openOnDevice lists what the process in dir has open on dev, as it
// names the files.
func openOnDevice(dir string, dev uint64) []string {
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil
	}
	var out []string
	for _, fd := range fds {
		p := filepath.Join(dir, "fd", fd.Name())
		if !onDevice(p, dev) {
			continue
		}
		target, err := os.Readlink(p)
		if err != nil {
			target = "fd " + fd.Name()
		}
		out = append(out, target)
	}
	return out
}

// comm is the command name of the process in dir.
func comm(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// mountsOfDevice lists the mount points of dev in a mountinfo file.
func mountsOfDevice(path string, dev uint64) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	want := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mp, majmin, ok := fuseMountLine(sc.Text()); ok && majmin == want {
			out = append(out, mp)
		}
	}
	return out
}
