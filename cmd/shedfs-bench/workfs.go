package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// workFS describes the filesystem every target of a run lives on, and
// whether it skews creates.
//
// ext4 without a journal does not reuse an inode deleted in the last 60 s
// (300 s while its table block is dirty) and, on every inode allocation,
// walks past each such inode (fs/ext4/ialloc.c: find_inode_bit ->
// recently_deleted, only when the superblock has no journal). So on such a
// disk a target whose creates run right after another target's deletes
// pays for them, and an A/B of creates or untars moves with the order of
// the targets (docs/performance.md, "The metadata cache"). The bench detects it and, run as
// root, measures on a journaled scratch filesystem instead (scratch.go).
type workFS struct {
	Path        string `json:"path"`               // the directory asked about
	MountPoint  string `json:"mount_point"`        // where its filesystem is mounted
	FSType      string `json:"fstype"`             // from mountinfo (ext4, xfs, tmpfs...)
	Source      string `json:"source,omitempty"`   // mountinfo's source (/dev/vda)
	Device      string `json:"device,omitempty"`   // the kernel's block device name (vda, loop0, dm-1)
	Journal     string `json:"journal"`            // journalYes, journalNo, journalNA or journalUnknown
	Evidence    string `json:"evidence,omitempty"` // what the journal answer was read from
	SkewsCreate bool   `json:"skews_creates"`      // ext4 without a journal: creates pay for recent deletes
}

// Answers of workFS.Journal.
const (
	journalYes     = "yes"
	journalNo      = "no"
	journalNA      = "n/a"     // not a block-device ext2/3/4 served by the ext4 driver
	journalUnknown = "unknown" // ext4, but nothing said whether it has one
)

// String is the one-line description of the report header and the log.
func (w workFS) String() string {
	var sb strings.Builder
	sb.WriteString(w.FSType)
	if w.FSType == "" {
		sb.WriteString("unknown filesystem")
	}
	if w.Device != "" {
		fmt.Fprintf(&sb, " on %s", w.Device)
	} else if w.Source != "" {
		fmt.Fprintf(&sb, " on %s", w.Source)
	}
	if w.MountPoint != "" {
		fmt.Fprintf(&sb, " at %s", w.MountPoint)
	}
	switch w.Journal {
	case journalYes:
		sb.WriteString(", with a journal")
	case journalNo:
		sb.WriteString(", WITHOUT a journal")
	case journalUnknown:
		sb.WriteString(", journal unknown")
	}
	if w.Evidence != "" {
		fmt.Fprintf(&sb, " (%s)", w.Evidence)
	}
	return sb.String()
}

// skewWarning says what a skewing filesystem does to the numbers.
const skewWarning = "ext4 without a journal makes each inode allocation walk past the inodes deleted on that disk in the last minutes (recently_deleted): a target's creates and untar slow down after another target's deletes, and A/Bs move with the order of targets"

// detectWorkFS describes the filesystem holding dir, reading the live
// system under root ("/" outside tests): the device from stat(2), the
// mount from /proc/self/mountinfo, the kernel's device name from
// /sys/dev/block and the journal from the ext4 driver's own files.
func detectWorkFS(root, dir string) (workFS, error) {
	w := workFS{Path: dir, Journal: journalNA}
	// mountinfo shows mount points with symbolic links resolved.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return w, fmt.Errorf("work filesystem: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return w, fmt.Errorf("stat %s: %w", dir, err)
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	info, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return w, fmt.Errorf("read mountinfo: %w", err)
	}
	if e, ok := mountOfDev(string(info), major, minor, dir); ok {
		w.MountPoint, w.FSType, w.Source = e.mountPoint, e.fstype, e.source
	} else {
		// Not visible at its place (a bind mount in a container): name
		// the type at least.
		var sfs unix.Statfs_t
		if err := unix.Statfs(dir, &sfs); err == nil {
			w.FSType = fsTypeName(int64(sfs.Type))
		}
	}
	// The kernel names a block device's superblock (s_id, the directory
	// names under /proc/fs/ext4 and /sys/fs/ext4) after the device itself:
	// the last element of its /sys/dev/block link, whatever name the
	// mount's source used (/dev/root, /dev/mapper/x, a UUID link).
	if link, err := os.Readlink(filepath.Join(root, "sys/dev/block", fmt.Sprintf("%d:%d", major, minor))); err == nil {
		w.Device = filepath.Base(link)
	}
	if w.Device == "" {
		return w, nil // not a block device (tmpfs, overlayfs, btrfs subvolume, FUSE)
	}
	w.Journal, w.Evidence = ext4Journal(readExt4Probe(root, w.Device))
	w.SkewsCreate = w.Journal == journalNo
	return w, nil
}

// mountEntry is one line of mountinfo, the fields the bench uses.
type mountEntry struct {
	mountPoint, fstype, source string
}

// mountOfDev finds in mountinfo text the mount of device major:minor that
// holds path: of the mounts of that device whose mount point is path or
// one of its parents, the deepest (bind mounts of one device may sit at
// several places).
func mountOfDev(mountinfo string, major, minor uint32, path string) (mountEntry, bool) {
	want := fmt.Sprintf("%d:%d", major, minor)
	path = filepath.Clean(path)
	var best mountEntry
	found := false
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		f := strings.Fields(line)
		if len(f) < 10 || f[2] != want {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if !(mp == "/" || path == mp || strings.HasPrefix(path, mp+"/")) {
			continue
		}
		sep := -1
		for i := 6; i < len(f)-2; i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 {
			continue
		}
		if !found || len(mp) > len(best.mountPoint) {
			best = mountEntry{mountPoint: mp, fstype: f[sep+1], source: unescapeMountinfo(f[sep+2])}
			found = true
		}
	}
	return best, found
}

// ext4Probe is what the ext4 and jbd2 drivers say about one device; a
// field is empty when its file was missing.
type ext4Probe struct {
	Device      string
	Driver      bool     // /proc/fs/ext4/DEV or /sys/fs/ext4/DEV exists: the ext4 driver serves it
	JournalTask string   // /sys/fs/ext4/DEV/journal_task: the jbd2 thread's pid, or "<none>"
	Options     string   // /proc/fs/ext4/DEV/options: every mount option, one a line
	JBD2        []string // names under /proc/fs/jbd2 (DEV-8 for an internal journal)
}

// readExt4Probe reads the ext4 and jbd2 drivers' files for dev under root.
func readExt4Probe(root, dev string) ext4Probe {
	p := ext4Probe{Device: dev}
	procDir := filepath.Join(root, "proc/fs/ext4", dev)
	sysDir := filepath.Join(root, "sys/fs/ext4", dev)
	for _, d := range []string{procDir, sysDir} {
		if _, err := os.Stat(d); err == nil {
			p.Driver = true
		}
	}
	if data, err := os.ReadFile(filepath.Join(sysDir, "journal_task")); err == nil {
		p.JournalTask = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile(filepath.Join(procDir, "options")); err == nil {
		p.Options = string(data)
	}
	if ents, err := os.ReadDir(filepath.Join(root, "proc/fs/jbd2")); err == nil {
		for _, e := range ents {
			p.JBD2 = append(p.JBD2, e.Name())
		}
	}
	return p
}

// ext4Journal decides from a probe whether the ext4 driver runs the device
// with a journal, and says from what. The sources, most direct first:
// journal_task (the journal thread's pid, "<none>" without a journal;
// Linux 5.x and later), the data= mode in the options (ext4 shows one only
// with a journal: without one it clears the data mode), a jbd2 entry named
// after the device (an internal journal; an external one is named after
// its own device, so its absence alone proves nothing).
func ext4Journal(p ext4Probe) (journal, evidence string) {
	if !p.Driver {
		return journalNA, ""
	}
	switch t := p.JournalTask; {
	case t == "<none>":
		return journalNo, "/sys/fs/ext4/" + p.Device + "/journal_task is <none>"
	case t != "":
		if _, err := strconv.Atoi(t); err == nil {
			return journalYes, "jbd2 thread " + t
		}
	}
	if p.Options != "" {
		for _, line := range strings.Split(p.Options, "\n") {
			if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "data="); ok {
				return journalYes, "data=" + mode
			}
		}
		return journalNo, "no data= mode in /proc/fs/ext4/" + p.Device + "/options"
	}
	for _, name := range p.JBD2 {
		if strings.HasPrefix(name, p.Device+"-") {
			return journalYes, "/proc/fs/jbd2/" + name
		}
	}
	return journalUnknown, ""
}

// printWorkFS writes the report header's lines on the filesystem the run
// used: which, whether it has a journal, and why a scratch one was made.
func (m machineInfo) printWorkFS(w io.Writer) {
	desc := m.WorkFSInfo.String()
	if m.WorkFSInfo.FSType == "" {
		desc = m.WorkFS
	}
	fmt.Fprintf(w, "work filesystem: %s; native, loopback source and shedfs store all on it (%s)\n", desc, m.WorkDir)
	if s := m.Scratch; s != nil {
		why := "as -scratch-fs " + s.Mode + " asked"
		if m.DirFS != nil && m.DirFS.SkewsCreate {
			why = "because -dir " + m.DirFS.Path + " is " + m.DirFS.String() + ", which skews creates"
		}
		fmt.Fprintf(w, "  a scratch filesystem: a sparse %s image %s, loop-mounted for this run and removed after it, %s\n", humanBytes(s.Size), s.Image, why)
	}
	if m.WorkFSInfo.SkewsCreate {
		fmt.Fprintf(w, "WARNING: %s; run as root with -scratch-fs auto (the default), or -dir on a journaled filesystem\n", skewWarning)
	}
}
