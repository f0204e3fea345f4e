package maptrim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mapFile makes a file of size bytes in dir, maps it shared and reads
// every page, as badger reads its tables.
func mapFile(t *testing.T, dir, name string, size int) []byte {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(data) })
	var sum int
	for i := 0; i < size; i += os.Getpagesize() {
		sum += int(data[i])
	}
	t.Logf("mapped %s, %d pages read (sum %d)", name, size/os.Getpagesize(), sum)
	return data
}

// mapped returns the resident bytes of this process's maps of the files
// in dir whose names end in suffix, from /proc/self/smaps.
func mapped(t *testing.T, dir, suffix string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	in := false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			path := strings.Join(f[min(5, len(f)):], " ")
			in = filepath.Dir(path) == dir && strings.HasSuffix(path, suffix)
			continue
		}
		if in && f[0] == "Rss:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += kb << 10
		}
	}
	return sum
}

func TestTrimReclaimsOverBudget(t *testing.T) {
	dir := t.TempDir()
	const size = 4 << 20
	table := mapFile(t, dir, "000001.sst", size)
	other := mapFile(t, dir, "000001.mem", size)

	before := mapped(t, dir, ".sst")
	if before < size/2 {
		t.Fatalf("Mapped = %d after reading every page of a %d-byte map, want most of it", before, size)
	}
	// Under the budget nothing is reclaimed.
	rss, err := Trim(dir, ".sst", 1<<40, 0)
	if err != nil || rss < 2*size*3/4 {
		t.Fatalf("Trim under budget = %d, %v; want the file-backed RSS (at least the two maps), nil", rss, err)
	}
	if now := mapped(t, dir, ".sst"); now < before {
		t.Fatalf("Trim under budget reclaimed: %d -> %d", before, now)
	}
	// Over it, the table's pages go; other files' maps stay.
	if _, err := Trim(dir, ".sst", 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	after := mapped(t, dir, ".sst")
	if after > before/4 {
		t.Fatalf("Trim over budget: %d bytes still resident of %d", after, before)
	}
	if mem := mapped(t, dir, ".mem"); mem < size/2 {
		t.Fatalf("Trim reclaimed a map it was not asked to: .mem holds %d", mem)
	}
	// The pages still hold what the file holds.
	table[0], other[0] = 7, 7
	if _, err := Trim(dir, ".sst", 0, 0); err != nil {
		t.Fatal(err)
	}
	if table[0] != 7 {
		t.Fatalf("a reclaimed page reads %d, want 7", table[0])
	}
}

func TestTrimLeavesOtherDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mapFile(t, a, "000001.sst", 1<<20)
	before := mapped(t, a, ".sst")
	if _, err := Trim(b, ".sst", 0, 0); err != nil {
		t.Fatal(err)
	}
	if after := mapped(t, a, ".sst"); after < before {
		t.Fatalf("Trim of another dir reclaimed this one's map: %d -> %d", before, after)
	}
}

// Under the budget of the whole RSS the maps stay, however much of the
// file-backed RSS they are: paged out, every later read of them is a read
// from the disk.
func TestTrimLeavesMapsUnderRSSBudget(t *testing.T) {
	dir := t.TempDir()
	const size = 4 << 20
	mapFile(t, dir, "000001.sst", size)
	before := mapped(t, dir, ".sst")
	if _, err := Trim(dir, ".sst", 0, 1<<40); err != nil {
		t.Fatal(err)
	}
	if now := mapped(t, dir, ".sst"); now < before {
		t.Fatalf("Trim under the RSS budget reclaimed: %d -> %d", before, now)
	}
	if _, err := Trim(dir, ".sst", 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if after := mapped(t, dir, ".sst"); after > before/4 {
		t.Fatalf("Trim over both budgets: %d bytes still resident of %d", after, before)
	}
}

func TestParseRSS(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		file, total  int64
		err          bool
	}{
		{"both", "Name:\tshedfs\nVmRSS:\t  153600 kB\nRssAnon:\t  100000 kB\nRssFile:\t   51200 kB\n", 50 << 20, 150 << 20, false},
		{"order", "RssFile:\t1 kB\nVmRSS:\t2 kB\n", 1 << 10, 2 << 10, false},
		{"no VmRSS", "RssFile:\t1 kB\n", 0, 0, true},
		{"no RssFile", "VmRSS:\t1 kB\n", 0, 0, true},
		{"bad unit", "RssFile:\t1 MB\nVmRSS:\t2 kB\n", 0, 0, true},
		{"empty", "", 0, 0, true},
	} {
		file, total, err := parseRSS(tc.status)
		if (err != nil) != tc.err || file != tc.file || total != tc.total {
			t.Errorf("%s: parseRSS = %d, %d, %v; want %d, %d, error %v", tc.name, file, total, err, tc.file, tc.total, tc.err)
		}
	}
}
