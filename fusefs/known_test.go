package fusefs

import (
	"log/slog"
	"slices"
	"testing"
	"time"
)

// TestKnownInodesCounts: a view holds an inode until the kernel forgot
// every entry it was given, and only the holders are listed.
func TestKnownInodesCounts(t *testing.T) {
	k := newKnownInodes()
	a, b := &View{user: "alice"}, &View{user: "bob"}
	k.learn(a, 7)
	k.learn(a, 7)
	k.learn(b, 7)
	if got := k.holders(7, nil, nil); len(got) != 2 {
		t.Fatalf("holders of 7: %d views, want 2", len(got))
	}
	if got := k.holders(7, a, nil); !slices.Equal(got, []*View{b}) {
		t.Fatalf("holders of 7 but alice: %v", got)
	}
	k.forget(a, 7, 1)
	if !k.knows(a, 7) {
		t.Fatal("alice forgot 1 of 2 entries and no longer holds 7")
	}
	k.forget(a, 7, 1)
	if k.knows(a, 7) {
		t.Fatal("alice forgot every entry and still holds 7")
	}
	k.forget(a, 7, 5) // more than was counted: nothing happens
	if !k.knows(b, 7) {
		t.Fatal("bob lost 7 by alice's forget")
	}
	k.learn(b, 8)
	if got := k.inodesOf(b); len(got) != 2 {
		t.Fatalf("inodes of bob: %v", got)
	}
	k.dropView(b)
	if k.knows(b, 7) || k.knows(b, 8) || len(k.holders(7, nil, nil)) != 0 {
		t.Fatal("an unmounted view still holds inodes")
	}
}

// TestPostNeverWaitsOnAWaiter: a change never waits for a view that has a
// request waiting itself, so no two requests wait on each other.
func TestPostNeverWaitsOnAWaiter(t *testing.T) {
	n := newNotifier(slog.New(slog.DiscardHandler))
	a, b := &View{user: "alice"}, &View{user: "bob"}
	b.waiting = 1
	// b's queue is never drained (no server): a wait for it would last
	// notifyWait.
	b.queue.running = true
	done := make(chan struct{})
	go func() {
		n.post(a, map[*View][]inval{b: {attrOf(1)}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(notifyWait / 2):
		t.Fatal("alice's change waited for bob, who was waiting himself")
	}
	if a.waiting != 0 {
		t.Fatalf("alice left waiting = %d", a.waiting)
	}
	if len(b.queue.items) != 1 {
		t.Fatalf("bob's queue: %v", b.queue.items)
	}
}
