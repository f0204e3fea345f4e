package metadata

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// lockedBuffer is a log sink several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestEtcdFeedOutageSaidOnce: with quorum lost, a daemon's change feed
// says once that it is interrupted (not 25 times a second), backs off,
// and says when it is back.
func TestEtcdFeedOutageSaidOnce(t *testing.T) {
	c := etcdtest.Start(t, 3)
	var logs lockedBuffer
	s, err := OpenEtcd(EtcdConfig{Endpoints: c.Endpoints(), Prefix: "feedlog/", Timeout: 2 * time.Second},
		Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Kill(c.Members[0])
	c.Kill(c.Members[1])
	time.Sleep(3 * time.Second)
	n := logs.count("change feed interrupted")
	t.Logf("%d feed interruption lines in 3 s with two members of three down", n)
	if n > 1 {
		t.Errorf("%d lines say the feed is interrupted, want one", n)
	}
	if err := c.RestartAll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for logs.count("change feed resumed") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the feed did not say it resumed\n%s", logs.b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := logs.count("change feed interrupted"); n > 1 {
		t.Errorf("%d lines say the feed is interrupted, want one", n)
	}
}

// TestEtcdJoinIsNotRecovery: a daemon joining others on a store, and a
// read-only open beside them (fsck --dry-run, status), find the store in
// use, not left unclean by a crash; once every daemon has stopped
// cleanly it is clean; one that stopped without closing (its lease gone,
// no other daemon left) leaves it unclean.
func TestEtcdJoinIsNotRecovery(t *testing.T) {
	cfg := testEtcd(t)
	open := func(readOnly bool) (*Store, *lockedBuffer) {
		t.Helper()
		var logs lockedBuffer
		s, err := OpenEtcd(cfg, Options{ReadOnly: readOnly, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s, &logs
	}
	a, _ := open(false)
	b, logs := open(false)
	if !b.WasClean() || logs.count("not closed cleanly") != 0 {
		t.Errorf("a daemon joining another: clean %v, log:\n%s", b.WasClean(), logs.b.String())
	}
	r, logs := open(true)
	if !r.WasClean() || logs.count("not closed cleanly") != 0 {
		t.Errorf("a read-only open beside two daemons: clean %v, log:\n%s", r.WasClean(), logs.b.String())
	}
	if peers, err := r.Peers(); err != nil || len(peers) != 2 {
		t.Errorf("a read-only open lists %v daemons (%v), want both", peers, err)
	}
	r.Close()
	b.Close()
	a.Close()
	c, logs := open(false)
	if !c.WasClean() || logs.count("not closed cleanly") != 0 {
		t.Errorf("after every daemon stopped cleanly: clean %v, log:\n%s", c.WasClean(), logs.b.String())
	}
	c.engine().Close() // dies: its lease goes, the store is not marked clean
	d, logs := open(false)
	defer d.Close()
	if d.WasClean() || logs.count("not closed cleanly") != 1 {
		t.Errorf("after the last daemon died: clean %v, log:\n%s", d.WasClean(), logs.b.String())
	}
}
