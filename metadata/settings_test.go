package metadata

import (
	"testing"

	"github.com/shedfs/shedfs"
)

func TestSettingsDefaults(t *testing.T) {
	s := newStore(t)
	st, err := s.GetSettings()
	if err != nil || st != (Settings{}) {
		t.Fatalf("fresh settings %+v, %v", st, err)
	}
	want := Settings{
		DefaultUserLimit:  shedfs.Limit{Bytes: 1 << 20, Inodes: 100},
		DefaultGroupLimit: shedfs.Limit{Bytes: 2 << 20},
		MaxFileSize:       1 << 30,
	}
	if err := s.SetSettings(want); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSettings(); got != want {
		t.Fatalf("settings %+v, want %+v", got, want)
	}
	if _, err := s.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddGroup("team"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.GetLimit("user:alice"); l != want.DefaultUserLimit {
		t.Fatalf("alice limit %+v", l)
	}
	if l, _ := s.GetLimit("group:team"); l != want.DefaultGroupLimit {
		t.Fatalf("team limit %+v", l)
	}
	if err := s.SetSettings(Settings{DefaultUserLimit: shedfs.Limit{Bytes: -1}}); err == nil {
		t.Fatal("negative default accepted")
	}
}
