package metadata

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestLinks(t *testing.T) {
	s := newStore(t)
	now := time.Now().Truncate(time.Second)
	for i, id := range []string{"b", "a", "c"} {
		if err := s.PutLink(Link{ID: id, User: "alice", Ino: uint64(100 + i), Created: now, Expires: now.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CountDownload("a"); err != nil {
		t.Fatal(err)
	}
	l, err := s.GetLink("a")
	if err != nil || l.Downloads != 1 || l.Ino != 101 || !l.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("GetLink = %+v, %v", l, err)
	}
	all, err := s.ListLinks()
	if err != nil || len(all) != 3 || all[0].ID != "a" || all[2].ID != "c" {
		t.Fatalf("ListLinks = %+v, %v", all, err)
	}
	// b expires now: purged; a and c stay.
	if n, err := s.PurgeLinks(now); err != nil || n != 1 {
		t.Fatalf("PurgeLinks = %d, %v", n, err)
	}
	if _, err := s.GetLink("b"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("purged link: %v", err)
	}
	if err := s.DeleteLink("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLink("a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("second revoke: %v", err)
	}
	if err := s.CountDownload("a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("download of a revoked link: %v", err)
	}
}
