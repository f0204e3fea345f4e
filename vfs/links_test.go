package vfs

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/acl"
)

// linkBook makes numbered links and keeps what it was asked.
type linkBook struct {
	made []string
	ttls []time.Duration
}

func (b *linkBook) NewLink(user string, ino, dir uint64, ttl time.Duration) (string, error) {
	url := fmt.Sprintf("http://x/%s/%d/%d", user, ino, len(b.made))
	b.made = append(b.made, url)
	b.ttls = append(b.ttls, ttl)
	return url, nil
}

func (b *linkBook) DefaultTTL() time.Duration { return 24 * time.Hour }

// TestLinkXattrs: user.shedfs.link* are answered by the core with no
// mount: ENOTSUP without a link service; the TTL defaults to the
// service's and is set per view; a size query and the read after it make
// one link; a bad lifetime is EINVAL.
func TestLinkXattrs(t *testing.T) {
	f := newFixture(t, nil)
	n := f.file(t, "f", 3)
	v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := At{Ino: n.Ino, Zone: n.Zone, Paths: paths("/f")}
	if _, e := v.Getxattr(at, acl.XattrLink, false); e != syscall.ENOTSUP {
		t.Fatalf("link without a service: %v, want ENOTSUP", e)
	}
	book := &linkBook{}
	f.core.SetLinks(book)
	if ttl, e := v.Getxattr(at, acl.XattrLinkTTL, false); e != 0 || string(ttl) != "24h0m0s" {
		t.Fatalf("default ttl: %q %v", ttl, e)
	}
	if e := v.Setxattr(at, acl.XattrLinkTTL, []byte("2h"), 0); e != 0 {
		t.Fatalf("set ttl: %v", e)
	}
	if e := v.Setxattr(at, acl.XattrLinkTTL, []byte("soon"), 0); e != syscall.EINVAL {
		t.Fatalf("set a bad ttl: %v, want EINVAL", e)
	}
	size, e := v.Getxattr(at, acl.XattrLink, true)
	if e != 0 {
		t.Fatal(e)
	}
	url, e := v.Getxattr(at, acl.XattrLink, false)
	if e != 0 || string(url) != string(size) || len(book.made) != 1 || book.ttls[0] != 2*time.Hour {
		t.Fatalf("size query then read: %q %q %v, made %v %v", size, url, e, book.made, book.ttls)
	}
	if again, _ := v.Getxattr(at, acl.XattrLink, false); string(again) == string(url) || len(book.made) != 2 {
		t.Fatalf("a second read made no new link: %q", again)
	}
	if f.events.count("share_link") != 2 {
		t.Errorf("share_link recorded %d times, want 2", f.events.count("share_link"))
	}
	// Another user's view sees no private file: nothing to link.
	if _, err := f.store.AddUser("bob"); err != nil {
		t.Fatal(err)
	}
	bob, err := f.core.NewView(DoorFUSE, "bob", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, e := bob.Getxattr(at, acl.XattrLink, false); e == 0 {
		t.Errorf("bob made a link to alice's private file")
	}
}
