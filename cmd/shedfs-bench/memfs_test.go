package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestMemfs mounts the ceiling filesystem in both forms and does through
// the kernel what the workloads do: it must be a working filesystem, or
// the ceiling it measures is not one.
func TestMemfs(t *testing.T) {
	for _, writeback := range []bool{false, true} {
		name := "plain"
		if writeback {
			name = "writeback"
		}
		t.Run(name, func(t *testing.T) {
			mnt := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			server, err := mountMemfs(mnt, writeback)
			if err != nil {
				t.Fatalf("mount memfs (needs root and /dev/fuse): %v", err)
			}
			t.Cleanup(func() {
				if err := server.Unmount(); err != nil {
					t.Errorf("unmount: %v", err)
					_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
				}
			})
			checkMemfs(t, mnt)
		})
	}
}

func checkMemfs(t *testing.T, mnt string) {
	t.Helper()
	d := filepath.Join(mnt, "d")
	if err := os.Mkdir(d, 0o750); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789"), 1000)
	f := filepath.Join(d, "f")
	if err := os.WriteFile(f, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(f); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	// The kernel forgets every inode it does not use (the cold-read
	// workloads do this): the tree must not lose them.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatalf("drop the dentry and inode caches (needs root): %v", err)
	}
	if got, err := os.ReadFile(f); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back after the kernel forgot it: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, 4); err != nil {
		t.Fatal(err)
	}
	// A write past the end after a truncate: the gap reads as zeros (from
	// memfs: the page cache is dropped first), not as what the truncate
	// cut off.
	if err := os.Truncate(f, 2); err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, "x", 6)
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
		t.Fatalf("drop the page cache: %v", err)
	}
	if got, err := os.ReadFile(f); err != nil || string(got) != "01\x00\x00\x00\x00x" {
		t.Fatalf("after a write past the end: %q, %v; want \"01\\x00\\x00\\x00\\x00x\"", got, err)
	}
	writeAt(t, f, "23", 2)
	if err := os.Truncate(f, 4); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 4 || st.Mode().Perm() != 0o644 {
		t.Fatalf("after chmod and truncate: size %d mode %v, want 4 and 0644", st.Size(), st.Mode().Perm())
	}
	if err := os.Symlink("f", filepath.Join(d, "s")); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(d, "s")); err != nil || target != "f" {
		t.Fatalf("readlink: %q, %v", target, err)
	}
	if err := os.Link(f, filepath.Join(d, "h")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(d, "h")); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Fatalf("hard link: %v, %v", st, err)
	}
	if err := os.Rename(filepath.Join(d, "h"), filepath.Join(mnt, "moved")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "moved")); err != nil || string(got) != "0123" {
		t.Fatalf("renamed link reads %q, %v", got, err)
	}
	// A rename over a name takes one link from the file it named.
	g := filepath.Join(mnt, "g")
	if err := os.WriteFile(g, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(g, filepath.Join(mnt, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatalf("drop the dentry and inode caches: %v", err)
	}
	if st, err := os.Stat(f); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Fatalf("f after a rename over its other name: %v, %v; want 1 link", st, err)
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"f", "s"}) {
		t.Fatalf("listing of d: %v, want [f s]", names)
	}
	if err := os.Remove(d); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a full directory: %v, want ENOTEMPTY", err)
	}
	for _, p := range []string{filepath.Join(d, "f"), filepath.Join(d, "s"), d, filepath.Join(mnt, "moved")} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed directory: %v, want ENOENT", err)
	}
}

// writeAt writes s at off in the file at p.
func writeAt(t *testing.T, p, s string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte(s), off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("write %q at %d of %s: %v", s, off, p, err)
	}
}
