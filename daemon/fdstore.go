package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// systemd's file descriptor store keeps the views across `systemctl
// restart`: a daemon told to stop for a restart (the unit's
// RestartKillSignal=) parks each view's FUSE connection in the store
// (sd_notify "FDSTORE=1" with the descriptor, SCM_RIGHTS), then the
// handover in a memfd, and exits without unmounting; systemd passes them
// to the next start (sd_listen_fds: LISTEN_FDS, LISTEN_PID,
// LISTEN_FDNAMES), which adopts the views as after a takeover and then
// empties the store (FDSTOREREMOVE=1). The handover is parked last: a
// store without it holds the views of a daemon that died while parking,
// whose state is not known, and is emptied.

const (
	// fdStorePrefix starts the name of everything shedfs parks.
	fdStorePrefix = "shedfs-"
	// fdStoreHandover names the memfd holding the Handover.
	fdStoreHandover = fdStorePrefix + "handover"
	// fdStoreView is the name of view i's connection, fdStoreView+i.
	fdStoreView = fdStorePrefix + "view-"
	// listenFdsStart is SD_LISTEN_FDS_START, the first passed descriptor.
	listenFdsStart = 3
)

// FDStoreRoom says whether the service manager can keep views views:
// NOTIFY_SOCKET is set, and $FDSTORE (FileDescriptorStoreMax=, which
// systemd ≥ 254 exports) leaves room for them and the handover; an older
// systemd does not say, and the unit file is trusted to have set it.
func FDStoreRoom(views int) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return errors.New("no service manager ($NOTIFY_SOCKET unset)")
	}
	v := os.Getenv("FDSTORE")
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("$FDSTORE=%q: %w", v, err)
	}
	if n < views+1 {
		return fmt.Errorf("the unit's FileDescriptorStoreMax=%d is below the %d descriptors of %d views and their handover", n, views+1, views)
	}
	return nil
}

// ParkInFDStore hands the views (HandOver's handover and descriptors) to
// the service manager's file descriptor store, one message per view so
// that each has its name, the handover last. The descriptors stay the
// caller's.
func ParkInFDStore(h *Handover, fds []int) error {
	if len(fds) != len(h.Views) {
		return fmt.Errorf("park views: %d views but %d descriptors", len(h.Views), len(fds))
	}
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("park views: %w", err)
	}
	mfd, err := unix.MemfdCreate(fdStoreHandover, unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("park views: %w", err)
	}
	defer unix.Close(mfd)
	if _, err := unix.Pwrite(mfd, b, 0); err != nil {
		return fmt.Errorf("park views: %w", err)
	}
	var sent []string
	for i, fd := range fds {
		name := fdStoreView + strconv.Itoa(i)
		if err := notify(fdStoreMessage(name), fd); err != nil {
			unpark(sent)
			return fmt.Errorf("park the view of %s: %w", h.Views[i].Key, err)
		}
		sent = append(sent, name)
	}
	if err := notify(fdStoreMessage(fdStoreHandover), mfd); err != nil {
		unpark(sent)
		return fmt.Errorf("park the handover: %w", err)
	}
	return nil
}

func fdStoreMessage(name string) string { return "FDSTORE=1\nFDNAME=" + name }

// Parked is what a daemon found in the file descriptor store at start.
type Parked struct {
	// Handover and Fds are the views to adopt (nil when none).
	Handover *Handover
	Fds      []int
	// Names are what to remove from the store once the views are
	// adopted (Unpark), so that a later crash aborts their connections
	// instead of leaving a stale handover for the next start.
	Names []string
	// Dropped says what was found but cannot be adopted, for the log.
	Dropped []string
}

// ParkedViews reads the descriptors the service manager passed
// (sd_listen_fds(3): LISTEN_PID must be this process; the variables are
// unset, the descriptors made close-on-exec). It returns nil when none
// are shedfs's. Descriptors of views without a handover (their daemon
// died while parking) are closed: those views are mounted afresh.
func ParkedViews() (*Parked, error) {
	named, err := listenFds()
	if err != nil || len(named) == 0 {
		return nil, err
	}
	p := &Parked{}
	views := map[string]int{}
	state := -1
	for name, fds := range named {
		if !strings.HasPrefix(name, fdStorePrefix) {
			p.Dropped = append(p.Dropped, fmt.Sprintf("%d descriptors named %q, not shedfs's", len(fds), name))
			closeAll(fds)
			continue
		}
		p.Names = append(p.Names, name)
		switch {
		case name == fdStoreHandover && state < 0 && len(fds) == 1:
			state = fds[0]
		case strings.HasPrefix(name, fdStoreView) && len(fds) == 1:
			views[name] = fds[0]
		default:
			p.Dropped = append(p.Dropped, fmt.Sprintf("%d descriptors named %q", len(fds), name))
			closeAll(fds)
		}
	}
	if len(p.Names) == 0 {
		return nil, nil
	}
	if state < 0 {
		for name, fd := range views {
			p.Dropped = append(p.Dropped, name+": no handover (its daemon died while parking)")
			unix.Close(fd)
		}
		return p, nil
	}
	h, err := readHandover(state)
	if err != nil {
		for _, fd := range views {
			unix.Close(fd)
		}
		return p, err
	}
	p.Handover = &Handover{Version: h.Version}
	for i, v := range h.Views {
		name := fdStoreView + strconv.Itoa(i)
		fd, ok := views[name]
		if !ok {
			// The manager closed it on POLLERR: the view was unmounted.
			p.Dropped = append(p.Dropped, v.Key+": its connection was not in the store")
			continue
		}
		delete(views, name)
		p.Handover.Views = append(p.Handover.Views, v)
		p.Fds = append(p.Fds, fd)
	}
	for name, fd := range views {
		p.Dropped = append(p.Dropped, name+": in no handover")
		unix.Close(fd)
	}
	return p, nil
}

// readHandover reads and closes the parked handover.
func readHandover(fd int) (*Handover, error) {
	f := os.NewFile(uintptr(fd), fdStoreHandover)
	defer f.Close()
	if _, err := f.Seek(0, 0); err != nil {
		return nil, fmt.Errorf("parked handover: %w", err)
	}
	var h Handover
	if err := json.NewDecoder(f).Decode(&h); err != nil {
		return nil, fmt.Errorf("parked handover: %w", err)
	}
	return &h, nil
}

// Unpark removes what p names from the service manager's store.
func (p *Parked) Unpark() error { return unpark(p.Names) }

// unpark removes the descriptors named names from the store.
func unpark(names []string) error {
	var errs []error
	for _, name := range names {
		if err := Notify("FDSTOREREMOVE=1\nFDNAME=" + name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listenFds implements sd_listen_fds_with_names(3): the descriptors
// passed from 3 on, by name ("unknown" when unnamed).
func listenFds() (map[string][]int, error) {
	pid, nfds, names := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	if pid == "" || nfds == "" {
		return nil, nil
	}
	if pid != strconv.Itoa(os.Getpid()) {
		// Meant for another process (inherited by mistake).
		return nil, nil
	}
	n, err := strconv.Atoi(nfds)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: not a count", nfds)
	}
	var list []string
	if names != "" {
		list = strings.Split(names, ":")
	}
	out := make(map[string][]int, n)
	for i := range n {
		fd := listenFdsStart + i
		unix.CloseOnExec(fd)
		name := "unknown"
		if i < len(list) && list[i] != "" {
			name = list[i]
		}
		out[name] = append(out[name], fd)
	}
	return out, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
