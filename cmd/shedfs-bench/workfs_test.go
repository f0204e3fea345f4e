package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMountOfDev(t *testing.T) {
	info := "26 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n" +
		"27 26 0:22 / /proc rw - proc proc rw\n" +
		"41 26 7:0 / /mnt/benchfs rw,relatime - ext4 /dev/loop0 rw\n" +
		"42 26 254:0 /var/tmp/x /srv/bind rw shared:3 - ext4 /dev/vda rw\n" +
		"43 26 7:1 / /mnt/a\\040b rw - ext4 /dev/loop1 rw\n" +
		"bad line\n"
	for _, c := range []struct {
		major, minor uint32
		path         string
		want         mountEntry
		ok           bool
	}{
		{254, 0, "/var/tmp", mountEntry{"/", "ext4", "/dev/vda"}, true},
		{7, 0, "/mnt/benchfs/shedfs-bench-1", mountEntry{"/mnt/benchfs", "ext4", "/dev/loop0"}, true},
		{7, 0, "/mnt/benchfs", mountEntry{"/mnt/benchfs", "ext4", "/dev/loop0"}, true},
		// A bind mount of the same device: the deepest mount holding the path.
		{254, 0, "/srv/bind/w", mountEntry{"/srv/bind", "ext4", "/dev/vda"}, true},
		// /srv/binder is not below /srv/bind.
		{254, 0, "/srv/binder", mountEntry{"/", "ext4", "/dev/vda"}, true},
		{7, 1, "/mnt/a b/c", mountEntry{"/mnt/a b", "ext4", "/dev/loop1"}, true},
		{9, 9, "/var/tmp", mountEntry{}, false},
		// The device is mounted, but not where the path is.
		{7, 0, "/var/tmp", mountEntry{}, false},
	} {
		got, ok := mountOfDev(info, c.major, c.minor, c.path)
		if ok != c.ok || got != c.want {
			t.Errorf("mountOfDev(%d:%d, %s) = %+v, %v; want %+v, %v", c.major, c.minor, c.path, got, ok, c.want, c.ok)
		}
	}
}

func TestExt4Journal(t *testing.T) {
	noJournalOpts := "rw\nbsddf\nnojournal_checksum\nbarrier\nstripe=0\ninode_readahead_blks=32\n"
	journalOpts := "rw\nbsddf\njournal_checksum\nbarrier\nstripe=0\ndata=ordered\ninode_readahead_blks=32\n"
	for _, c := range []struct {
		name string
		p    ext4Probe
		want string
	}{
		{"not ext4", ext4Probe{Device: "vdb", JBD2: []string{"vdb-8"}}, journalNA},
		{"journal_task none", ext4Probe{Device: "vda", Driver: true, JournalTask: "<none>", Options: journalOpts}, journalNo},
		{"journal_task pid", ext4Probe{Device: "loop0", Driver: true, JournalTask: "4179", Options: noJournalOpts}, journalYes},
		{"old kernel, options without data=", ext4Probe{Device: "vda", Driver: true, Options: noJournalOpts, JBD2: []string{"loop0-8"}}, journalNo},
		{"old kernel, data=ordered", ext4Probe{Device: "vda", Driver: true, Options: journalOpts}, journalYes},
		{"old kernel, data=writeback", ext4Probe{Device: "sda1", Driver: true, Options: "rw\ndata=writeback\n"}, journalYes},
		{"only jbd2", ext4Probe{Device: "loop0", Driver: true, JBD2: []string{"loop1-8", "loop0-8"}}, journalYes},
		// loop1's journal says nothing about loop10.
		{"only jbd2 of another", ext4Probe{Device: "loop10", Driver: true, JBD2: []string{"loop1-8", "loop100-8"}}, journalUnknown},
		{"nothing", ext4Probe{Device: "vda", Driver: true}, journalUnknown},
		{"garbage journal_task", ext4Probe{Device: "vda", Driver: true, JournalTask: "?"}, journalUnknown},
	} {
		got, evidence := ext4Journal(c.p)
		if got != c.want {
			t.Errorf("%s: journal %q (%s), want %q", c.name, got, evidence, c.want)
		}
		if (got == journalYes || got == journalNo) && evidence == "" {
			t.Errorf("%s: no evidence for %q", c.name, got)
		}
	}
}

// TestDetectWorkFS runs the detection on a real directory against fake
// /proc and /sys trees that describe its device in each way a kernel can.
func TestDetectWorkFS(t *testing.T) {
	dir := t.TempDir()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	for _, c := range []struct {
		name    string
		files   map[string]string // path under the fake root: content
		link    string            // /sys/dev/block/DEV's target, "" for none
		journal string
		device  string
		skews   bool
	}{
		{"ext4 without a journal", map[string]string{"sys/fs/ext4/vda/journal_task": "<none>\n", "proc/fs/ext4/vda/options": "rw\n"},
			"../../devices/pci0000:00/0000:00:05.0/virtio2/block/vda", journalNo, "vda", true},
		{"journaled loop device", map[string]string{"sys/fs/ext4/loop0/journal_task": "4179\n", "proc/fs/jbd2/loop0-8/info": ""},
			"../../devices/virtual/block/loop0", journalYes, "loop0", false},
		{"partition, old kernel", map[string]string{"proc/fs/ext4/sda1/options": "rw\ndata=ordered\n"},
			"../../devices/pci0000:00/ata1/host0/block/sda/sda1", journalYes, "sda1", false},
		{"xfs", map[string]string{}, "../../devices/virtual/block/dm-1", journalNA, "dm-1", false},
		{"no block device (tmpfs)", map[string]string{}, "", journalNA, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			info := fmt.Sprintf("22 1 0:21 / /proc rw - proc proc rw\n99 1 %s / %s rw,relatime - ext4 /dev/root rw\n", dev, dir)
			files := map[string]string{"proc/self/mountinfo": info}
			for k, v := range c.files {
				files[k] = v
			}
			for p, content := range files {
				p = filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.link != "" {
				if err := os.MkdirAll(filepath.Join(root, "sys/dev/block"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(c.link, filepath.Join(root, "sys/dev/block", dev)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := detectWorkFS(root, dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.Journal != c.journal || got.Device != c.device || got.SkewsCreate != c.skews ||
				got.MountPoint != dir || got.FSType != "ext4" || got.Source != "/dev/root" {
				t.Errorf("got %+v; want journal %s, device %s, skews %v, mounted at %s", got, c.journal, c.device, c.skews, dir)
			}
			// Through a symbolic link (mountinfo has the resolved path).
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			if viaLink, err := detectWorkFS(root, link); err != nil || viaLink.MountPoint != dir || viaLink.Journal != c.journal || viaLink.Path != link {
				t.Errorf("through a link: %+v, %v", viaLink, err)
			}
		})
	}
	if _, err := detectWorkFS(t.TempDir(), filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory is not an error")
	}
}

func TestPrintWorkFS(t *testing.T) {
	noJournal := workFS{Path: "/var/tmp", MountPoint: "/", FSType: "ext4", Source: "/dev/vda", Device: "vda",
		Journal: journalNo, Evidence: "/sys/fs/ext4/vda/journal_task is <none>", SkewsCreate: true}
	scratch := workFS{Path: "/var/tmp/s/mnt/w", MountPoint: "/var/tmp/s/mnt", FSType: "ext4", Device: "loop3",
		Journal: journalYes, Evidence: "jbd2 thread 77"}
	for _, c := range []struct {
		name       string
		m          machineInfo
		want, nots []string
	}{
		{"skewed", machineInfo{WorkFS: "ext4", WorkDir: "/var/tmp", WorkFSInfo: noJournal},
			[]string{"work filesystem: ext4 on vda at /, WITHOUT a journal (/sys/fs/ext4/vda/journal_task is <none>)", "WARNING: ext4 without a journal", "-scratch-fs"}, []string{"scratch filesystem:"}},
		{"scratch", machineInfo{WorkFS: "ext4", WorkDir: "/var/tmp/s/mnt", WorkFSInfo: scratch, DirFS: &noJournal,
			Scratch: &scratchFS{Image: "/var/tmp/s/fs.img", Size: 24 << 30, Mode: scratchAuto}},
			[]string{"work filesystem: ext4 on loop3 at /var/tmp/s/mnt, with a journal (jbd2 thread 77)", "a sparse 24GiB image /var/tmp/s/fs.img", "because -dir /var/tmp is ext4 on vda at /, WITHOUT a journal"}, []string{"WARNING"}},
		{"journaled", machineInfo{WorkFS: "ext4", WorkDir: "/mnt/benchfs", WorkFSInfo: workFS{FSType: "ext4", Device: "loop0", MountPoint: "/mnt/benchfs", Journal: journalYes}},
			[]string{"ext4 on loop0 at /mnt/benchfs, with a journal;"}, []string{"WARNING", "scratch"}},
		{"undetected", machineInfo{WorkFS: "tmpfs", WorkDir: "/tmp"}, []string{"work filesystem: tmpfs;"}, []string{"WARNING"}},
	} {
		var sb strings.Builder
		c.m.printWorkFS(&sb)
		for _, w := range c.want {
			if !strings.Contains(sb.String(), w) {
				t.Errorf("%s: header lacks %q:\n%s", c.name, w, sb.String())
			}
		}
		for _, w := range c.nots {
			if strings.Contains(sb.String(), w) {
				t.Errorf("%s: header has %q:\n%s", c.name, w, sb.String())
			}
		}
	}
}

func TestParseScratchFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		mode string
		size int64
	}{
		{"auto", scratchAuto, 0}, {"AUTO", scratchAuto, 0}, {"off", scratchOff, 0}, {"none", scratchOff, 0}, {"0", scratchOff, 0},
		{"8GiB", "size", 8 << 30}, {"512M", "size", 512 << 20},
	} {
		mode, size, err := parseScratchFlag(c.in)
		if err != nil || mode != c.mode || size != c.size {
			t.Errorf("parseScratchFlag(%q) = %q, %d, %v; want %q, %d", c.in, mode, size, err, c.mode, c.size)
		}
	}
	for _, in := range []string{"yes", "1MiB", "-1", "8 parsecs"} {
		if _, _, err := parseScratchFlag(in); err == nil {
			t.Errorf("parseScratchFlag(%q) accepted", in)
		}
	}
	cfg, err := parseFlags(nil)
	if err != nil || cfg.scratchMode != scratchAuto {
		t.Errorf("default -scratch-fs = %q, %v; want auto", cfg.scratchMode, err)
	}
}

// TestScratchFS makes, detects and removes a real scratch filesystem
// (root, mkfs.ext4 and loop devices; CI has them).
func TestScratchFS(t *testing.T) {
	if os.Geteuid() != 0 {
		skipUnlessCI(t, "a scratch filesystem needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		skipUnlessCI(t, "a scratch filesystem needs mkfs.ext4 (e2fsprogs)")
	}
	parent := t.TempDir()
	s, err := makeScratchFS(context.Background(), parent, scratchMinSize, "size")
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			_ = s.remove()
		}
	}()
	if !strings.HasPrefix(s.Image, parent+"/") || !strings.HasPrefix(s.Mount, parent+"/") {
		t.Errorf("scratch %+v not under %s", s, parent)
	}
	w, err := detectWorkFS("/", s.Mount)
	if err != nil {
		t.Fatal(err)
	}
	if w.FSType != "ext4" || w.Journal != journalYes || w.SkewsCreate || !strings.HasPrefix(w.Device, "loop") || w.MountPoint != s.Mount {
		t.Errorf("scratch filesystem detected as %+v; want journaled ext4 on a loop device at %s", w, s.Mount)
	}
	if err := os.WriteFile(filepath.Join(s.Mount, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed = true
	if err := s.remove(); err != nil {
		t.Fatal(err)
	}
	if ok, err := isMountPoint(s.Mount); ok || err != nil {
		t.Errorf("still mounted at %s (%v)", s.Mount, err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("scratch directory %s left behind: %v", s.Dir, err)
	}
	if out, err := exec.Command("losetup", "-j", s.Image).CombinedOutput(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("loop device left attached: %s", out)
	}
}

// skipUnlessCI skips a test that needs what this machine lacks, and fails
// it on CI, where everything must run.
func skipUnlessCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", why)
	}
	t.Skip(why)
}
