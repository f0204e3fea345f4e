package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The probes a supervisor asks on the metrics address: /healthz says the
// process answers HTTP at all (a liveness probe: restart it if not);
// /readyz says it serves what it should, the store open and every view
// that should be mounted mounted (a readiness probe: send no work to it,
// or do not count the rollout done, until it says so). A stopping daemon
// is not ready, so that a load balancer drains it first.

// ErrNotStarted is Ready's answer before Start (or StartAdmin) finished.
var ErrNotStarted = errors.New("starting: the views are not all mounted yet")

// Ready reports why the daemon is not ready to serve, nil when it is: it
// has started and not begun to stop, its store answers, and under a mount
// root every user's view is mounted.
func (d *Daemon) Ready() error {
	d.mu.Lock()
	started, stopped := d.started, d.stopped
	d.mu.Unlock()
	switch {
	case stopped:
		return errors.New("stopping")
	case !started:
		return ErrNotStarted
	}
	users, err := d.cfg.Store.Meta.ListUsers()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if d.cfg.MountRoot == "" {
		return nil // shedfs mount: its one view was mounted before it started
	}
	var missing []string
	for _, u := range users {
		if d.viewOf(u.Name) == "" {
			missing = append(missing, u.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("views not mounted: %s", strings.Join(missing, ", "))
	}
	return nil
}

// healthHandler answers /healthz: the process answers.
func healthHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyHandler answers /readyz: 200 "ready", or 503 with why not.
func (d *Daemon) readyHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := d.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ready")
}
