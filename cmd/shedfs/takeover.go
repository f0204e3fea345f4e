package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/daemon"
)

// takeoverReadyTimeout bounds how long a daemon handing its views over
// waits for the new one to be ready before it takes them back.
const takeoverReadyTimeout = 2 * time.Minute

// takeover is the new daemon's side of a takeover (daemon/takeover.go):
// the views it was handed, and the connection to the old daemon, nil for
// a restart in place and for views parked in systemd's file descriptor
// store (parked, emptied once they are adopted).
type takeover struct {
	conn   *daemon.TakeoverConn
	h      *daemon.Handover
	fds    []int
	parked *daemon.Parked
}

// receiveTakeover gets the views of the daemon serving the store: from
// that daemon (--takeover), inherited by a restart in place, or parked by
// the daemon before it in the service manager's file descriptor store
// (a `systemctl restart`). nil when none.
func receiveTakeover(c *cli.Context, log *slog.Logger) (*takeover, error) {
	h, fds, err := daemon.InheritedHandover()
	if err != nil || h != nil {
		return &takeover{h: h, fds: fds}, err
	}
	p, err := daemon.ParkedViews()
	if err != nil {
		return nil, err
	}
	if p != nil {
		for _, d := range p.Dropped {
			log.Warn("restart: not taken from the file descriptor store; mounted afresh", "what", d)
		}
		if p.Handover != nil {
			return &takeover{h: p.Handover, fds: p.Fds, parked: p}, nil
		}
		if err := p.Unpark(); err != nil {
			log.Warn("restart: the file descriptor store not emptied", "err", err)
		}
	}
	if !c.Bool("takeover") {
		return nil, nil
	}
	loc, err := location(c)
	if err != nil {
		return nil, err
	}
	admin := loc.SocketPath()
	if admin == "" {
		return nil, errors.New("--takeover: the running daemon is found through its admin socket: set --admin-socket")
	}
	conn, err := daemon.DialTakeover(admin)
	if err != nil {
		return nil, err
	}
	h, fds, err = conn.ReceiveHandover()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &takeover{conn: conn, h: h, fds: fds}, nil
}

// adopt takes the views over and serves them once the old daemon let go.
// Until it says "ready", a failure here leaves the old daemon to take the
// views back: nothing is unmounted.
func (t *takeover) adopt(s *serving) error {
	// Restarted in place, no other daemon can take the views back.
	if err := s.d.Adopt(t.h, t.fds, t.conn == nil); err != nil {
		return err
	}
	if t.parked != nil {
		// Before anything is served: until then, the parked state is
		// still exact for a start after a crash here.
		if err := t.parked.Unpark(); err != nil {
			s.log.Warn("restart: the file descriptor store not emptied", "err", err)
		}
	}
	if t.conn != nil {
		if err := t.conn.Send("ready"); err != nil {
			return err
		}
		// "go", or the old daemon is gone: either way the views are
		// this daemon's now.
		line, err := t.conn.Line()
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return err
		}
		if err == nil && line != "go" {
			return fmt.Errorf("takeover: the running daemon answered %q", line)
		}
		t.conn.Close()
	}
	s.d.ServeAdopted()
	s.log.Info("took over the views", "views", len(t.h.Views))
	return nil
}

// offerTakeover waits on the takeover socket for a daemon that takes
// over (serve --takeover) and hands it every view; stopDoors stops what
// the daemon serves beside its views and admin socket. The returned
// function stops waiting.
func (s *serving) offerTakeover(stopDoors func()) (func(), error) {
	admin := s.st.Location().SocketPath()
	if admin == "" {
		return func() {}, nil
	}
	path := daemon.TakeoverSocketPath(admin)
	if max := len(unix.RawSockaddrUnix{}.Path) - 1; len(path) > max {
		// The admin socket fits and serves; only upgrades in place
		// are not offered.
		s.log.Warn("takeover not offered: its socket path is too long for a Unix socket; serve --takeover cannot take over this daemon",
			"path", path, "bytes", len(path), "limit", max)
		return func() {}, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("takeover socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("takeover socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("takeover socket: %w", err)
	}
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			s.handOver(daemon.NewTakeoverConn(c), stopDoors)
		}
	}()
	return func() { ln.Close() }, nil
}

// handOver is the old daemon's side of a takeover. Once it has stopped
// serving, it ends the process: with the new daemon serving, or, when
// the new one failed or went away before it was ready, restarted in place
// with the views it handed over.
func (s *serving) handOver(t *daemon.TakeoverConn, stopDoors func()) {
	defer t.Close()
	if err := t.Hello(); err != nil {
		t.Refuse(err)
		return
	}
	if err := s.d.CanHandOver(); err != nil {
		s.log.Warn("takeover refused", "err", err)
		t.Refuse(err)
		return
	}
	s.log.Info("takeover: handing every view to a new daemon")
	stopDoors()
	ctx, cancel := context.WithTimeout(context.Background(), s.stopTimeout)
	defer cancel()
	h, fds, err := s.d.HandOver(ctx)
	if cerr := s.close(); cerr != nil {
		s.log.Error("takeover: close the store", "err", cerr)
	}
	if err == nil {
		err = t.SendHandover(h, fds)
	}
	if err == nil {
		err = awaitReady(t)
	}
	if err != nil {
		s.log.Error("takeover failed: restarting in place to serve the views again", "err", err)
		err = daemon.Reexec(h, fds)
		s.log.Error("restart in place failed: the views are left without a daemon", "err", err)
		os.Exit(1)
	}
	// Under systemd the new daemon is the unit's main process now.
	if pid := t.PeerPid(); pid > 0 {
		if err := daemon.Notify(fmt.Sprintf("MAINPID=%d", pid)); err != nil {
			s.log.Warn("takeover: systemd not told the new main process", "err", err)
		}
	}
	if err := t.Send("go"); err != nil {
		s.log.Warn("takeover: the new daemon did not hear go", "err", err)
	}
	s.log.Info("takeover: the new daemon serves every view; exiting")
	os.Exit(0)
}

// awaitReady waits for the new daemon's "ready".
func awaitReady(t *daemon.TakeoverConn) error {
	done := make(chan error, 1)
	go func() {
		line, err := t.Line()
		if err == nil && line != "ready" {
			err = fmt.Errorf("takeover: the new daemon said %q", line)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(takeoverReadyTimeout):
		t.Close()
		return fmt.Errorf("takeover: the new daemon was not ready within %s", takeoverReadyTimeout)
	}
}

// upgradeOnSignal makes SIGUSR2 an upgrade without unmounting: the
// binary now at the daemon's own path takes over from it (as serve
// --takeover with the same arguments), inside the same service, so that
// `systemctl reload` (ExecReload=kill -USR2 $MAINPID) upgrades the daemon
// and systemd follows it as the unit's main process (MAINPID).
func (s *serving) upgradeOnSignal() func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for range ch {
			if err := s.startSuccessor(); err != nil {
				s.log.Error("upgrade: the successor did not start", "err", err)
			}
		}
	}()
	return func() { signal.Stop(ch) }
}

// startSuccessor starts the binary at the daemon's path with its
// arguments and --takeover; the takeover itself comes through the
// takeover socket.
func (s *serving) startSuccessor() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{}, os.Args[1:]...)
	if !slices.Contains(args, "--takeover") {
		args = append(args, "--takeover")
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.log.Info("upgrade: started the successor", "binary", exe, "pid", cmd.Process.Pid)
	// Reaped if it ends while this daemon still runs.
	go cmd.Wait()
	return nil
}

// parkSignal stops the daemon for a restart that keeps the views: the
// unit's RestartKillSignal= (deploy/systemd/shedfs.service), which
// systemd sends on `systemctl restart` where `systemctl stop` sends
// SIGTERM.
const parkSignal = syscall.SIGUSR1

// park ends the daemon for a restart by the service manager without
// unmounting a view: it parks every view in systemd's file descriptor
// store (daemon/fdstore.go), for the next start to adopt. It returns
// false, with nothing changed, when the views cannot be parked (no
// service manager, a store too small, a view that cannot be handed
// over): the caller then stops as for SIGTERM, draining the views.
func (s *serving) park(stopDoors func()) (bool, error) {
	if err := s.d.CanHandOver(); err != nil {
		s.log.Warn("restart: the views cannot be kept; stopping as for SIGTERM", "err", err)
		return false, nil
	}
	if err := daemon.FDStoreRoom(len(s.d.Views())); err != nil {
		s.log.Warn("restart: the views cannot be parked in the file descriptor store; stopping as for SIGTERM", "err", err)
		return false, nil
	}
	if err := daemon.Notify("STOPPING=1\nSTATUS=restarting: parking every view in the file descriptor store"); err != nil {
		s.log.Warn("systemd stop not sent", "err", err)
	}
	s.log.Info("restart: parking every view in the service manager's file descriptor store")
	stopDoors()
	ctx, cancel := context.WithTimeout(context.Background(), s.stopTimeout)
	defer cancel()
	h, fds, err := s.d.HandOver(ctx)
	if err != nil {
		// What h holds is parked all the same (HandOver).
		s.log.Error("restart: not every view could be handed over", "err", err)
	}
	if cerr := s.close(); cerr != nil {
		s.log.Error("restart: close the store", "err", cerr)
	}
	if err := daemon.ParkInFDStore(h, fds); err != nil {
		return false, fmt.Errorf("restart: the views are lost: %w", err)
	}
	s.log.Info("restart: every view parked; exiting", "views", len(h.Views))
	return true, nil
}
