package vfs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	rd = syscall.F_RDLCK
	wr = syscall.F_WRLCK
	un = syscall.F_UNLCK
)

// rec and fl build requests: owner o of view v, a type and an inclusive
// range.
func rec(v, o uint64, typ uint32, start, end uint64) fileLock {
	return fileLock{owner: lockOwner{view: v, owner: o}, kind: kindRecord, typ: typ, start: start, end: end}
}

func fl(v, o uint64, typ uint32) fileLock {
	return fileLock{owner: lockOwner{view: v, owner: o}, kind: kindFlock, typ: typ, start: 0, end: maxOffset}
}

// state renders the locks of ino as "view/owner kind type start-end", sorted.
func state(t *lockTable, ino uint64) string {
	var out []string
	for _, l := range t.list() {
		if l.ino != ino {
			continue
		}
		end := fmt.Sprint(l.end)
		if l.end == maxOffset {
			end = "EOF"
		}
		typ := "R"
		if l.typ == wr {
			typ = "W"
		}
		out = append(out, fmt.Sprintf("%d/%d %s %s %d-%s", l.owner.view, l.owner.owner, l.kind, typ, l.start, end))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// TestLockTableSet: each row applies a sequence of requests to one inode
// and checks the result of the last and the locks held after it.
func TestLockTableSet(t *testing.T) {
	eagain := syscall.EAGAIN
	tests := []struct {
		name  string
		steps []fileLock
		want  syscall.Errno // of the last step; the others must succeed
		held  string
	}{
		{"write blocks write", []fileLock{rec(1, 1, wr, 0, 99), rec(2, 1, wr, 50, 50)}, eagain, "1/1 posix W 0-99"},
		{"write blocks read", []fileLock{rec(1, 1, wr, 0, 99), rec(2, 1, rd, 0, 0)}, eagain, "1/1 posix W 0-99"},
		{"read blocks write", []fileLock{rec(1, 1, rd, 0, 99), rec(2, 1, wr, 99, 200)}, eagain, "1/1 posix R 0-99"},
		{"reads share", []fileLock{rec(1, 1, rd, 0, 99), rec(2, 1, rd, 0, 99)}, 0, "1/1 posix R 0-99, 2/1 posix R 0-99"},
		{"disjoint writes", []fileLock{rec(1, 1, wr, 0, 9), rec(2, 1, wr, 10, 19)}, 0, "1/1 posix W 0-9, 2/1 posix W 10-19"},
		{"same owner number, other view", []fileLock{rec(1, 7, wr, 0, 9), rec(2, 7, wr, 0, 9)}, eagain, "1/7 posix W 0-9"},
		{"own locks never conflict", []fileLock{rec(1, 1, wr, 0, 9), rec(1, 1, rd, 0, 9)}, 0, "1/1 posix R 0-9"},
		{"unlock a middle", []fileLock{rec(1, 1, wr, 0, 99), rec(1, 1, un, 10, 19)}, 0, "1/1 posix W 0-9, 1/1 posix W 20-99"},
		{"the hole is free", []fileLock{rec(1, 1, wr, 0, 99), rec(1, 1, un, 10, 19), rec(2, 1, wr, 10, 19)}, 0,
			"1/1 posix W 0-9, 1/1 posix W 20-99, 2/1 posix W 10-19"},
		{"the rest is not", []fileLock{rec(1, 1, wr, 0, 99), rec(1, 1, un, 10, 19), rec(2, 1, wr, 9, 10)}, eagain,
			"1/1 posix W 0-9, 1/1 posix W 20-99"},
		{"unlock the head", []fileLock{rec(1, 1, wr, 10, 99), rec(1, 1, un, 0, 49)}, 0, "1/1 posix W 50-99"},
		{"unlock all", []fileLock{rec(1, 1, wr, 10, 19), rec(1, 1, wr, 30, 39), rec(1, 1, un, 0, maxOffset)}, 0, ""},
		{"unlock of nothing", []fileLock{rec(1, 1, un, 0, 9)}, 0, ""},
		{"unlock is per owner", []fileLock{rec(1, 1, rd, 0, 9), rec(2, 1, rd, 0, 9), rec(2, 1, un, 0, 9)}, 0, "1/1 posix R 0-9"},
		{"adjoining merge", []fileLock{rec(1, 1, rd, 0, 9), rec(1, 1, rd, 20, 29), rec(1, 1, rd, 10, 19)}, 0, "1/1 posix R 0-29"},
		{"overlapping merge", []fileLock{rec(1, 1, wr, 0, 15), rec(1, 1, wr, 10, 29)}, 0, "1/1 posix W 0-29"},
		{"gap stays", []fileLock{rec(1, 1, rd, 0, 9), rec(1, 1, rd, 11, 19)}, 0, "1/1 posix R 0-9, 1/1 posix R 11-19"},
		{"other types do not merge", []fileLock{rec(1, 1, rd, 0, 9), rec(1, 1, wr, 10, 19)}, 0, "1/1 posix R 0-9, 1/1 posix W 10-19"},
		{"downgrade a middle", []fileLock{rec(1, 1, wr, 0, 99), rec(1, 1, rd, 40, 59)}, 0,
			"1/1 posix R 40-59, 1/1 posix W 0-39, 1/1 posix W 60-99"},
		{"upgrade over a gap", []fileLock{rec(1, 1, rd, 0, 9), rec(1, 1, rd, 20, 29), rec(1, 1, wr, 5, 24)}, 0,
			"1/1 posix R 0-4, 1/1 posix R 25-29, 1/1 posix W 5-24"},
		{"upgrade blocked by a reader", []fileLock{rec(1, 1, rd, 0, 9), rec(2, 1, rd, 5, 5), rec(1, 1, wr, 0, 9)}, eagain,
			"1/1 posix R 0-9, 2/1 posix R 5-5"},
		{"to EOF", []fileLock{rec(1, 1, wr, 100, maxOffset), rec(2, 1, wr, 1<<40, 1<<40+1)}, eagain, "1/1 posix W 100-EOF"},
		{"flock excludes flock", []fileLock{fl(1, 1, wr), fl(2, 1, rd)}, eagain, "1/1 flock W 0-EOF"},
		{"flock shared", []fileLock{fl(1, 1, rd), fl(2, 1, rd)}, 0, "1/1 flock R 0-EOF, 2/1 flock R 0-EOF"},
		{"flock and posix ignore each other", []fileLock{fl(1, 1, wr), rec(2, 1, wr, 0, maxOffset)}, 0,
			"1/1 flock W 0-EOF, 2/1 posix W 0-EOF"},
		{"posix and flock ignore each other", []fileLock{rec(1, 1, wr, 0, 0), fl(2, 1, wr)}, 0, "1/1 posix W 0-0, 2/1 flock W 0-EOF"},
		{"one owner's flock and posix", []fileLock{fl(1, 1, wr), rec(1, 1, wr, 0, 9), rec(1, 1, un, 0, maxOffset)}, 0, "1/1 flock W 0-EOF"},
		{"flock relock same type", []fileLock{fl(1, 1, wr), fl(1, 1, wr)}, 0, "1/1 flock W 0-EOF"},
		{"flock downgrade", []fileLock{fl(1, 1, wr), fl(1, 1, rd)}, 0, "1/1 flock R 0-EOF"},
		{"flock unlock", []fileLock{fl(1, 1, wr), fl(1, 1, un)}, 0, ""},
		// As on Linux, a conversion lets go of the old lock first: the
		// failed upgrade leaves owner 1 holding nothing.
		{"flock upgrade refused drops", []fileLock{fl(1, 1, rd), fl(2, 1, rd), fl(1, 1, wr)}, eagain, "2/1 flock R 0-EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLockTable()
			var via lockRefs
			for i, req := range tc.steps {
				e := lt.set(10, req, &via)
				last := i == len(tc.steps)-1
				if !last && e != 0 {
					t.Fatalf("step %d: %v", i, e)
				}
				if last && e != tc.want {
					t.Errorf("last step: errno %v, want %v", e, tc.want)
				}
			}
			if got := state(lt, 10); got != tc.held {
				t.Errorf("held:\n got %s\nwant %s", got, tc.held)
			}
			if tc.held == "" && len(lt.inodes) != 0 {
				t.Errorf("an inode without locks stays in the table: %d entries", len(lt.inodes))
			}
		})
	}
}

// TestLockTableTest: F_GETLK reports a lock in the way, and none for the
// owner's own locks or on another inode.
func TestLockTableTest(t *testing.T) {
	lt := newLockTable()
	if e := lt.set(1, rec(1, 1, wr, 100, 199), nil); e != 0 {
		t.Fatal(e)
	}
	if l, ok, _ := lt.test(1, rec(2, 1, rd, 0, 150)); !ok || l.typ != wr || l.start != 100 || l.end != 199 || l.owner != (lockOwner{view: 1, owner: 1}) {
		t.Errorf("test from another owner: %+v %v, want the write lock 100-199", l, ok)
	}
	if _, ok, _ := lt.test(1, rec(2, 1, rd, 0, 99)); ok {
		t.Error("test of a free range reports a conflict")
	}
	if _, ok, _ := lt.test(1, rec(1, 1, wr, 0, maxOffset)); ok {
		t.Error("test by the holder itself reports a conflict")
	}
	if _, ok, _ := lt.test(2, rec(2, 1, wr, 0, maxOffset)); ok {
		t.Error("test on another inode reports a conflict")
	}
}

// waitAsync runs a blocking request and returns its result on a channel.
func waitAsync(ctx context.Context, lt *lockTable, ino uint64, req fileLock, via *lockRefs) <-chan syscall.Errno {
	ch := make(chan syscall.Errno, 1)
	go func() { ch <- lt.wait(ctx, ino, req, via) }()
	return ch
}

// blocked fails the test if ch delivers within a short while.
func blocked(t *testing.T, what string, ch <-chan syscall.Errno) {
	t.Helper()
	select {
	case e := <-ch:
		t.Fatalf("%s: returned %v, want it to wait", what, e)
	case <-time.After(50 * time.Millisecond):
	}
}

// granted fails the test unless ch delivers success soon.
func granted(t *testing.T, what string, ch <-chan syscall.Errno, want syscall.Errno) {
	t.Helper()
	select {
	case e := <-ch:
		if e != want {
			t.Fatalf("%s: %v, want %v", what, e, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5s", what)
	}
}

// TestLockTableWakeups: a waiting request is granted when what was in its
// way goes, however it goes, and not before.
func TestLockTableWakeups(t *testing.T) {
	ctx := context.Background()
	releases := []struct {
		name    string
		release func(lt *lockTable, via *lockRefs)
	}{
		{"unlock", func(lt *lockTable, via *lockRefs) { lt.set(1, rec(1, 1, un, 0, maxOffset), via) }},
		{"downgrade", func(lt *lockTable, via *lockRefs) { lt.set(1, rec(1, 1, rd, 0, maxOffset), via) }},
		{"close of the owner", func(lt *lockTable, via *lockRefs) { lt.unlockOwner(1, lockOwner{view: 1, owner: 1}, kindRecord) }},
		{"release of the handle", func(lt *lockTable, via *lockRefs) { lt.closed(1, via) }},
		{"end of the view", func(lt *lockTable, via *lockRefs) { lt.dropView(1) }},
	}
	for _, r := range releases {
		t.Run(r.name, func(t *testing.T) {
			lt := newLockTable()
			var holder, waiter lockRefs
			if e := lt.set(1, rec(1, 1, wr, 0, maxOffset), &holder); e != 0 {
				t.Fatal(e)
			}
			ch := waitAsync(ctx, lt, 1, rec(2, 1, rd, 10, 10), &waiter)
			blocked(t, "reader behind a writer", ch)
			// Something else changing on the inode is no reason to grant.
			if e := lt.set(1, rec(3, 1, wr, 0, 0), nil); e != syscall.EAGAIN {
				t.Fatalf("third owner: %v", e)
			}
			blocked(t, "reader after an unrelated attempt", ch)
			r.release(lt, &holder)
			granted(t, "reader after "+r.name, ch, 0)
			if got := state(lt, 1); !strings.Contains(got, "2/1 posix R 10-10") {
				t.Errorf("held after the grant: %s", got)
			}
		})
	}
}

// TestLockTableWaitersQueue: several waiters for one exclusive lock get it
// one at a time, each when the previous holder lets go.
func TestLockTableWaitersQueue(t *testing.T) {
	lt := newLockTable()
	ctx := context.Background()
	if e := lt.set(1, fl(1, 1, wr), nil); e != 0 {
		t.Fatal(e)
	}
	grants := make(chan lockOwner, 3)
	for v := uint64(2); v <= 4; v++ {
		req := fl(v, 1, wr)
		go func() {
			if lt.wait(ctx, 1, req, nil) == 0 {
				grants <- req.owner
			}
		}()
	}
	holder := lockOwner{view: 1, owner: 1}
	for range 3 {
		select {
		case o := <-grants:
			t.Fatalf("%v got the lock while %v held it", o, holder)
		case <-time.After(50 * time.Millisecond):
		}
		lt.unlockOwner(1, holder, kindFlock)
		select {
		case holder = <-grants:
		case <-time.After(5 * time.Second):
			t.Fatal("no waiter got the lock within 5s")
		}
	}
	lt.unlockOwner(1, holder, kindFlock)
	if len(lt.inodes) != 0 {
		t.Errorf("table not empty: %s", state(lt, 1))
	}
}

// TestLockTableCancel: a wait ends with EINTR when its context does,
// leaves nothing behind, and a later release grants nobody.
func TestLockTableCancel(t *testing.T) {
	lt := newLockTable()
	if e := lt.set(1, rec(1, 1, wr, 0, 9), nil); e != 0 {
		t.Fatal(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(ctx, lt, 1, rec(2, 1, wr, 5, 5), nil)
	blocked(t, "writer behind a writer", ch)
	cancel()
	granted(t, "cancelled wait", ch, syscall.EINTR)
	if il := lt.inodes[1]; il == nil || il.waiters != 0 {
		t.Errorf("waiters after the cancel: %+v", il)
	}
	lt.set(1, rec(1, 1, un, 0, maxOffset), nil)
	if len(lt.inodes) != 0 {
		t.Errorf("table not empty after the last unlock: %s", state(lt, 1))
	}
	// Cancelled before it starts: no lock either, even when free.
	if e := lt.wait(ctx, 1, rec(2, 1, wr, 5, 5), nil); e != 0 {
		t.Errorf("wait on a free range with a done context: %v, want 0 (a free lock is granted at once)", e)
	}
}

// TestLockTableOwnersAndHandles: a POSIX owner's locks go at a close
// (FLUSH) whatever handle they came through; locks of an owner that used
// one handle (OFD, flock) go with that handle, and stay while another
// handle the owner used is open.
func TestLockTableOwnersAndHandles(t *testing.T) {
	lt := newLockTable()
	var h1, h2, h3 lockRefs
	proc := lockOwner{view: 1, owner: 100} // a process: its locks come through h1 and h2
	ofd := lockOwner{view: 1, owner: 200}  // an open file description: only h3
	must := func(e syscall.Errno) {
		t.Helper()
		if e != 0 {
			t.Fatal(e)
		}
	}
	must(lt.set(1, fileLock{owner: proc, typ: wr, start: 0, end: 9}, &h1))
	must(lt.set(1, fileLock{owner: proc, typ: wr, start: 20, end: 29}, &h2))
	must(lt.set(1, fileLock{owner: ofd, typ: rd, start: 50, end: 59}, &h3))
	must(lt.set(1, fileLock{owner: ofd, kind: kindFlock, typ: wr, end: maxOffset}, &h3))

	lt.closed(1, &h1)
	if got, want := state(lt, 1), "1/100 posix W 0-9, 1/100 posix W 20-29, 1/200 flock W 0-EOF, 1/200 posix R 50-59"; got != want {
		t.Errorf("after h1's release (proc still uses h2):\n got %s\nwant %s", got, want)
	}
	lt.closed(1, &h3)
	if got, want := state(lt, 1), "1/100 posix W 0-9, 1/100 posix W 20-29"; got != want {
		t.Errorf("after h3's release:\n got %s\nwant %s", got, want)
	}
	lt.unlockOwner(1, lockOwner{view: 1, owner: 999}, kindRecord)
	lt.unlockOwner(1, lockOwner{view: 2, owner: 100}, kindRecord)
	if got, want := state(lt, 1), "1/100 posix W 0-9, 1/100 posix W 20-29"; got != want {
		t.Errorf("a close by another owner released something:\n got %s\nwant %s", got, want)
	}
	lt.unlockOwner(1, proc, kindFlock)
	if state(lt, 1) == "" {
		t.Errorf("a flock unlock released record locks")
	}
	lt.unlockOwner(1, proc, kindRecord)
	if got := state(lt, 1); got != "" {
		t.Errorf("after the process's close: %s", got)
	}
	lt.closed(1, &h2)
	if len(lt.inodes) != 0 || len(lt.uses) != 0 {
		t.Errorf("table not empty: %d inodes, %d uses", len(lt.inodes), len(lt.uses))
	}
}

// TestLockTableDropView: the end of a view releases its locks on every
// inode, and only its.
func TestLockTableDropView(t *testing.T) {
	lt := newLockTable()
	var via lockRefs
	lt.set(1, rec(1, 1, rd, 0, 9), &via)
	lt.set(2, fl(1, 2, wr), &via)
	lt.set(1, rec(2, 1, rd, 0, 9), nil)
	lt.dropView(1)
	if got := state(lt, 1) + "|" + state(lt, 2); got != "2/1 posix R 0-9|" {
		t.Errorf("after view 1 ended: %s", got)
	}
	if len(lt.uses) != 0 {
		t.Errorf("uses of the gone view remain: %v", lt.uses)
	}
}
