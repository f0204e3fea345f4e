// Package etcdtest starts a real etcd cluster of separate processes on
// localhost for tests: the metadata engine of a multi-host store must be
// proven against the server it will meet in production (Debian's
// etcd-server), never against an in-process imitation.
package etcdtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is where Debian's etcd-server puts the server.
const Binary = "/usr/bin/etcd"

// MaxTxnOps is the --max-txn-ops the test cluster runs with, and the value
// the README asks production clusters for: one shedfs transaction compares
// every key it read (see metadata's etcd engine), which a rename in a
// large directory can take past etcd's default of 128.
const MaxTxnOps = 4096

// Member is one etcd process of a Cluster.
type Member struct {
	Name      string
	ClientURL string
	peerURL   string
	dataDir   string
	logPath   string

	mu  sync.Mutex
	cmd *exec.Cmd
	// done is closed when the process has been waited for.
	done chan struct{}
}

// Cluster is a running etcd cluster whose members are child processes of
// the test.
type Cluster struct {
	Members []*Member
	initial string
	token   string
	dir     string // removed by Stop when the cluster made it
	// maxTxnOps is the cluster's --max-txn-ops, MaxTxnOps when 0.
	maxTxnOps int
}

// Available reports whether the etcd server is installed. Tests that need
// it call Start, which fails loudly under CI=true when it is not.
func Available() bool {
	_, err := os.Stat(Binary)
	return err == nil
}

// Start starts an n-member cluster in t's temporary directory, waits until
// every member serves clients, and stops it when t ends (even on failure).
// Without the etcd binary it fails the test when CI=true and skips it
// otherwise.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartLimited(t, n, MaxTxnOps)
}

// StartLimited is Start with etcd's --max-txn-ops at maxTxnOps, for a
// test of work too big for one transaction that should not need a huge
// one to show it.
func StartLimited(t testing.TB, n, maxTxnOps int) *Cluster {
	t.Helper()
	if !Available() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: .ci/run installs Debian's etcd-server", Binary)
		}
		t.Skipf("%s is missing (apt-get install etcd-server)", Binary)
	}
	c, err := start(t.TempDir(), n, maxTxnOps)
	if c != nil {
		t.Cleanup(c.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// StartShared starts an n-member cluster that outlives single tests, for
// a package's TestMain or a lazily started fixture; the caller calls
// Stop, which also removes its directory.
func StartShared(n int) (*Cluster, error) {
	if !Available() {
		return nil, fmt.Errorf("%s is missing: apt-get install etcd-server", Binary)
	}
	dir, err := os.MkdirTemp("", "shedfs-etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcd test cluster: %w", err)
	}
	c, err := start(dir, n, MaxTxnOps)
	if c != nil {
		c.dir = dir
	}
	if err != nil {
		if c != nil {
			c.Stop()
		}
		return nil, err
	}
	return c, nil
}

// start starts the cluster, again on fresh ports when a member lost its
// port to another process between freeURL's probe and etcd's listen (the
// probe closes the port it found; a busy machine running other tests may
// take it meanwhile).
func start(dir string, n, maxTxnOps int) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		sub := filepath.Join(dir, fmt.Sprintf("try%d", attempt))
		c, err := startOnce(sub, n, maxTxnOps)
		if err == nil || attempt == 3 || !strings.Contains(err.Error()+c.logsOrEmpty(), "address already in use") {
			return c, err
		}
		if c != nil {
			c.Stop()
		}
	}
}

// logsOrEmpty is the members' logs, "" for no cluster.
func (c *Cluster) logsOrEmpty() string {
	if c == nil {
		return ""
	}
	return c.Logs()
}

func startOnce(dir string, n, maxTxnOps int) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd test cluster: %w", err)
	}
	c := &Cluster{token: fmt.Sprintf("shedfs-test-%d", time.Now().UnixNano()), maxTxnOps: maxTxnOps}
	var initial []string
	for i := range n {
		m := &Member{
			Name:    fmt.Sprintf("m%d", i),
			dataDir: filepath.Join(dir, fmt.Sprintf("m%d", i)),
			logPath: filepath.Join(dir, fmt.Sprintf("m%d.log", i)),
		}
		var err error
		if m.ClientURL, err = freeURL(); err != nil {
			return nil, err
		}
		if m.peerURL, err = freeURL(); err != nil {
			return nil, err
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.peerURL)
	}
	c.initial = strings.Join(initial, ",")
	for _, m := range c.Members {
		if err := c.run(m, "new"); err != nil {
			return c, err
		}
	}
	for _, m := range c.Members {
		if err := m.waitHealthy(30 * time.Second); err != nil {
			return c, fmt.Errorf("%w\n%s", err, c.Logs())
		}
	}
	return c, nil
}

// Endpoints returns the members' client addresses (host:port).
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, strings.TrimPrefix(m.ClientURL, "http://"))
	}
	return eps
}

// run starts m's process.
func (c *Cluster) run(m *Member, state string) error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("etcd log: %w", err)
	}
	cmd := exec.Command(Binary,
		"--name", m.Name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", c.initial,
		"--initial-cluster-state", state,
		"--initial-cluster-token", c.token,
		"--max-txn-ops", fmt.Sprint(cmp.Or(c.maxTxnOps, MaxTxnOps)),
		"--heartbeat-interval", "50",
		"--election-timeout", "500",
		"--logger", "zap",
		"--log-outputs", "stderr",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start etcd %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// Kill stops m with SIGKILL and waits for it to exit.
func (c *Cluster) Kill(m *Member) {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts a killed member again on its data directory and waits
// until it serves clients.
func (c *Cluster) Restart(m *Member) error {
	if err := c.run(m, "existing"); err != nil {
		return err
	}
	if err := m.waitHealthy(30 * time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, c.Logs())
	}
	return nil
}

// Logs returns every member's log, for a failing test's output.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, m := range c.Members {
		data, _ := os.ReadFile(m.logPath)
		fmt.Fprintf(&b, "--- etcd %s:\n%s\n", m.Name, data)
	}
	return b.String()
}

// RestartAll starts every killed member again (a member alone cannot
// become healthy without a quorum) and waits until all serve clients.
func (c *Cluster) RestartAll() error {
	for _, m := range c.Members {
		m.mu.Lock()
		running := m.cmd != nil
		m.mu.Unlock()
		if running {
			continue
		}
		if err := c.run(m, "existing"); err != nil {
			return err
		}
	}
	for _, m := range c.Members {
		if err := m.waitHealthy(30 * time.Second); err != nil {
			return fmt.Errorf("%w\n%s", err, c.Logs())
		}
	}
	return nil
}

// Stop kills every member and removes the cluster's directory if
// StartShared made it.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		c.Kill(m)
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// waitHealthy polls m's /health endpoint: it answers true once the member
// has joined a cluster with a leader.
func (m *Member) waitHealthy(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last error
	for {
		last = m.health(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd %s not healthy after %v: %w", m.Name, limit, last)
		case <-time.After(50 * time.Millisecond):
		}
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		if done != nil {
			select {
			case <-done:
				return fmt.Errorf("etcd %s exited while starting", m.Name)
			default:
			}
		}
	}
}

// Leader returns the member that leads the cluster now, nil if none
// says so (read from each member's /metrics).
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		body, err := m.get(context.Background(), "/metrics")
		if err == nil && strings.Contains(body, "\netcd_server_is_leader 1") {
			return m
		}
	}
	return nil
}

func (m *Member) health(ctx context.Context) error {
	body, err := m.get(ctx, "/health")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"health":"true"`) {
		return errors.New("not healthy yet")
	}
	return nil
}

// get fetches path from m's client URL over HTTP/1.0.
func (m *Member) get(ctx context.Context, path string) (string, error) {
	addr := strings.TrimPrefix(m.ClientURL, "http://")
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return "", err
	}
	data, err := io.ReadAll(conn)
	if len(data) == 0 && err != nil {
		return "", err
	}
	return string(data), nil
}

// freeURL returns a localhost URL with a port nobody listens on now.
func freeURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String(), nil
}
