// Package maptrim keeps a process from being charged, in its RSS, for
// every page of the files it reads through memory maps. Badger reads its
// tables through shared maps of the files: each page a lookup touched stays
// mapped, and so counted in the daemon's RSS, until the table is closed,
// although only the kernel's page cache holds it. A stat of 100,000 files
// of a store of a million touched most of its inode records that way (55
// MiB of its 80 MiB of tables).
//
// Trim hands such pages back: when the process's file-backed RSS is over a
// budget (and its whole RSS over another), it asks the kernel to reclaim the pages of the chosen files' maps
// (MADV_PAGEOUT), as it would under memory pressure. MADV_PAGEOUT is used, not MADV_DONTNEED,
// because the list of maps is read before the advice is given: a map the
// owner unmapped in between may already hold other memory, and
// MADV_PAGEOUT never changes what any page holds (anonymous memory without
// swap stays where it is), where MADV_DONTNEED would zero it.
package maptrim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mapping is one shared file map of this process.
type mapping struct {
	start, end uintptr
}

// Trim reclaims the pages of this process's shared maps of the files in
// dir whose names end in suffix once the process's file-backed RSS (its
// binary, libraries and every file map) is over fileBudget and its whole
// RSS over rssBudget, and returns the file-backed RSS as it was. Both are
// read from /proc/self/status, which costs little (the kernel keeps the
// RSS counted; smaps would walk every page table). The pages stay valid:
// the next access reads them again. MADV_PAGEOUT drops a clean page of a
// file only this process maps from the page cache as well, so every read
// of a trimmed page is a read from the disk: trimming is worth its cost
// only when the RSS it bounds is near its limit (rssBudget), not whenever
// the maps hold more than the binary.
func Trim(dir, suffix string, fileBudget, rssBudget int64) (int64, error) {
	file, total, err := readRSS()
	if err != nil {
		return 0, err
	}
	if file <= fileBudget || total <= rssBudget {
		return file, nil
	}
	ms, err := mappings(dir, suffix)
	if err != nil {
		return file, err
	}
	for _, m := range ms {
		// EINVAL or ENOMEM: the map went away or changed meanwhile,
		// which the next round sees.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_PAGEOUT)
	}
	return file, nil
}

// readRSS reads RssFile and VmRSS from /proc/self/status.
func readRSS() (file, total int64, err error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, fmt.Errorf("maptrim: %w", err)
	}
	return parseRSS(string(data))
}

// parseRSS reads the RssFile and VmRSS lines of a /proc/PID/status text.
func parseRSS(status string) (file, total int64, err error) {
	var haveFile, haveTotal bool
	for line := range strings.Lines(status) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "RssFile" && name != "VmRSS") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if name == "RssFile" {
			file, haveFile = kb<<10, true
		} else {
			total, haveTotal = kb<<10, true
		}
	}
	if !haveFile || !haveTotal {
		return 0, 0, fmt.Errorf("maptrim: no RssFile or VmRSS line in /proc/self/status")
	}
	return file, total, nil
}

// mappings reads /proc/self/maps for the shared maps of files in dir
// ending in suffix.
func mappings(dir, suffix string) ([]mapping, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("maptrim: %w", err)
	}
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("maptrim: %w", err)
	}
	var out []mapping
	for line := range strings.Lines(string(data)) {
		// start-end perms offset dev inode [path]
		f := strings.Fields(line)
		if len(f) < 6 || len(f[1]) != 4 || f[1][3] != 's' {
			continue
		}
		path := strings.Join(f[5:], " ")
		if filepath.Dir(path) != abs || !strings.HasSuffix(path, suffix) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{start: uintptr(start), end: uintptr(end)})
	}
	return out, nil
}
