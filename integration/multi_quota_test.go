package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

const mib = 1 << 20

// groupUsed is the bytes charged to group team-alpha, as the daemon at
// sock says.
func groupUsed(t *testing.T, s *etcdStore, sock string) int64 {
	t.Helper()
	out := adminOK(t, append([]string{"quota", "show", "group:team-alpha", "--json", "--admin-socket", sock}, s.args...)...)
	var qs []struct {
		Used struct {
			Bytes int64 `json:"bytes"`
		} `json:"used"`
	}
	if err := json.Unmarshal([]byte(out), &qs); err != nil || len(qs) != 1 {
		t.Fatalf("quota show --json: %v\n%s", err, out)
	}
	return qs[0].Used.Bytes
}

// writeUpTo creates path and writes 64 KiB at a time until max bytes
// are written or a write fails; it returns what was acknowledged and the
// error that stopped it (nil when max was reached), after closing.
func writeUpTo(path string, max int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	chunk := bytes.Repeat([]byte("q"), 64<<10)
	var n int64
	for n < max {
		k, err := f.Write(chunk[:min(int64(len(chunk)), max-n)])
		n += int64(k)
		if err != nil {
			f.Close()
			return n, err
		}
	}
	return n, f.Close()
}

// TestEtcdQuotaExactAcrossHosts: a group quota shared by writers on two
// hosts admits exactly what fits, whichever daemon took its 4 MiB
// allotment chunk first: two writers of 3 MiB at once fill a 5 MiB quota
// to the byte, and right after one host's file is closed, a write on the
// other that fits is admitted (the closed file's allotment, kept for a
// second, is given back when asked for).
func TestEtcdQuotaExactAcrossHosts(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	s.cli(t, "quota", "set", "group:team-alpha", "--bytes", "5MiB")
	s.cli(t, "trash", "retention", "0")
	a, sockA := startEtcdServe(t, s, "alice", "bob")
	b, _ := startEtcdServe(t, s, "alice", "bob")
	ga := func(name string) string { return a.In("alice", "groups", "team-alpha", name) }
	gb := func(name string) string { return b.In("bob", "groups", "team-alpha", name) }
	room := 5*mib - groupUsed(t, s, sockA)
	room -= room % (64 << 10)

	// Two writers of 3 MiB at once, one per host.
	var wg sync.WaitGroup
	var acked [2]int64
	var errs [2]error
	for i, path := range []string{ga("fa"), gb("fb")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked[i], errs[i] = writeUpTo(path, 3*mib)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, syscall.EDQUOT) {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	t.Logf("two writers of 3 MiB at once on two hosts: %d + %d bytes acknowledged, %d fit", acked[0], acked[1], room)
	if acked[0]+acked[1] != room {
		t.Errorf("two writers on two hosts wrote %d + %d = %d bytes, want exactly the %d that fit",
			acked[0], acked[1], acked[0]+acked[1], room)
	}

	// Empty again; then A writes 3 MiB and closes, and B writes the rest
	// at once.
	wantOK(t, "rm fa", os.Remove(ga("fa")))
	wantOK(t, "rm fb", os.Remove(gb("fb")))
	if _, ok := within(5*time.Second, func() bool { return 5*mib-groupUsed(t, s, sockA) >= room }); !ok {
		t.Fatal("the group's usage did not go back after the files were removed")
	}
	for round := range 3 {
		first, second := ga(fmt.Sprintf("a%d", round)), gb(fmt.Sprintf("b%d", round))
		if round%2 == 1 {
			first, second = gb(fmt.Sprintf("b%d", round)), ga(fmt.Sprintf("a%d", round))
		}
		if n, err := writeUpTo(first, 3*mib); err != nil {
			t.Fatalf("round %d: 3 MiB into an empty 5 MiB quota: %d bytes, %v", round, n, err)
		}
		start := time.Now()
		n, err := writeUpTo(second, room-3*mib)
		took := time.Since(start)
		if err != nil {
			t.Errorf("round %d: %d bytes on the other host right after a close, refused after %d (%v) in %v",
				round, room-3*mib, n, err, took.Round(time.Millisecond))
		} else {
			t.Logf("round %d: the other host's %d bytes written in %v", round, n, took.Round(time.Millisecond))
		}
		os.Remove(first)
		os.Remove(second)
		if _, ok := within(5*time.Second, func() bool { return 5*mib-groupUsed(t, s, sockA) >= room }); !ok {
			t.Fatal("the group's usage did not go back after the files were removed")
		}
	}
	a.Stop()
	b.Stop()
}

// TestEtcdTrashOpenAcrossHosts: trash × etcd × open files, as a table.
// A file written on host A is opened on host B and removed on A, so it
// is kept in the trash while B reads it; then each case does one thing
// to it. Whatever is done, B reads the whole file for as long as it holds
// it, and the charge follows the blob: both stay while B reads, and go at
// B's last close when the file left the trash meanwhile (purged on either
// host, or by rm in trash/), or stay when it is still kept or live again
// (evicted for nothing, restored).
func TestEtcdTrashOpenAcrossHosts(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	s.cli(t, "quota", "set", "group:team-alpha", "--bytes", "6MiB")
	a, sockA := startEtcdServe(t, s, "alice", "bob")
	b, sockB := startEtcdServe(t, s, "alice", "bob")
	ga := func(name string) string { return a.In("alice", "groups", "team-alpha", name) }
	gb := func(name string) string { return b.In("bob", "groups", "team-alpha", name) }
	keptOnA := func(t *testing.T, name string) string {
		t.Helper()
		var kept []string
		if _, ok := within(3*time.Second, func() bool {
			kept, _ = filepath.Glob(a.In("alice", "trash", "groups", "team-alpha", name+"@*"))
			return len(kept) == 1
		}); !ok {
			t.Fatalf("trash/groups/team-alpha/%s@* on A: %v, want one kept file", name, kept)
		}
		return kept[0]
	}
	blobDir := filepath.Dir(s.args[3])
	data := bytes.Repeat([]byte("0123456789abcdef"), 4*mib/16)

	cases := []struct {
		name string
		// act does the case's thing to name, kept in the trash and
		// open on B; it returns the bytes and blobs it added that stay.
		act func(t *testing.T, name string) (int64, int)
		// kept says the file still holds its charge and blob after
		// B's close (in the trash, or restored). A's open mark (A
		// wrote the file) goes with A's rm, so it never holds the
		// file past B's close (vfs/marks.go).
		kept bool
	}{
		{"trash purge on A", func(t *testing.T, name string) (int64, int) {
			adminOK(t, append([]string{"trash", "purge", "--all", "--admin-socket", sockA}, s.args...)...)
			return 0, 0
		}, false},
		{"trash purge on B, the host that holds it open", func(t *testing.T, name string) (int64, int) {
			adminOK(t, append([]string{"trash", "purge", "--all", "--admin-socket", sockB}, s.args...)...)
			return 0, 0
		}, false},
		{"rm in trash/ on A", func(t *testing.T, name string) (int64, int) {
			wantOK(t, "rm the kept file on A", os.Remove(keptOnA(t, name)))
			return 0, 0
		}, false},
		{"quota eviction on A: a write that needs its room is refused", func(t *testing.T, name string) (int64, int) {
			n, err := writeUpTo(ga("new-"+name), 4*mib)
			if !errors.Is(err, syscall.EDQUOT) {
				t.Errorf("4 MiB more into 6 MiB beside a 4 MiB kept file B reads: %d bytes, %v; want EDQUOT", n, err)
			}
			return n, 1
		}, true},
		{"restored on A (mv out of trash/)", func(t *testing.T, name string) (int64, int) {
			wantOK(t, "mv the kept file back on A", os.Rename(keptOnA(t, name), ga(name)))
			return 0, 0
		}, true},
	}
	used, blobs := groupUsed(t, s, sockA), len(blobFiles(t, blobDir))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("f%d", i)
			// B opens it first while it is empty and closes that
			// handle only after the second open, as its probes did
			// under load when a release came late: B's open state
			// must follow what A wrote meanwhile.
			mustWrite(t, ga(name), nil, 0o644)
			var early *os.File
			if _, ok := within(3*time.Second, func() bool {
				var err error
				early, err = os.Open(gb(name))
				return err == nil
			}); !ok {
				t.Fatalf("empty %s from A not opened on B", name)
			}
			mustWrite(t, ga(name), data, 0o644)
			var fd *os.File
			if _, ok := within(3*time.Second, func() bool {
				f, err := os.Open(gb(name))
				if err != nil {
					return false
				}
				if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(data)) {
					f.Close()
					return false
				}
				fd = f
				return true
			}); !ok {
				t.Fatalf("%s from A not opened on B", name)
			}
			early.Close()
			defer fd.Close()
			wantOK(t, "rm on A", os.Remove(ga(name)))

			addedBytes, addedBlobs := tc.act(t, name)
			used, blobs := used+addedBytes, blobs+addedBlobs
			buf := make([]byte, len(data)+1)
			for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if n, err := fd.ReadAt(buf, 0); n != len(data) || !bytes.Equal(buf[:n], data) {
					t.Fatalf("B reads %d bytes, %v", n, err)
				}
			}
			if u, n := groupUsed(t, s, sockA), len(blobFiles(t, blobDir)); u != used+int64(len(data)) || n != blobs+1 {
				t.Errorf("while B reads: the group uses %d bytes and %d blobs, want %d and %d", u, n, used+int64(len(data)), blobs+1)
			}
			fd.Close()
			wantUsed, wantBlobs := used, blobs
			if tc.kept {
				wantUsed, wantBlobs = used+int64(len(data)), blobs+1
				time.Sleep(time.Second) // what goes at the close would go now
			}
			if took, ok := within(10*time.Second, func() bool {
				return groupUsed(t, s, sockA) == wantUsed && len(blobFiles(t, blobDir)) == wantBlobs
			}); !ok {
				t.Errorf("after B's close: the group uses %d bytes and %d blobs, want %d and %d",
					groupUsed(t, s, sockA), len(blobFiles(t, blobDir)), wantUsed, wantBlobs)
			} else if !tc.kept {
				t.Logf("freed %v after B's close", took.Round(time.Millisecond))
			}
			// What the case left goes, for the next one.
			os.Remove(ga(name))
			os.Remove(ga("new-" + name))
			adminOK(t, append([]string{"trash", "purge", "--all", "--admin-socket", sockA}, s.args...)...)
			if _, ok := within(10*time.Second, func() bool {
				return groupUsed(t, s, sockA) == used-addedBytes && len(blobFiles(t, blobDir)) == blobs-addedBlobs
			}); !ok {
				t.Fatalf("after the purge of what the case left: the group uses %d bytes and %d blobs, want %d and %d",
					groupUsed(t, s, sockA), len(blobFiles(t, blobDir)), used-addedBytes, blobs-addedBlobs)
			}
		})
	}
	a.Stop()
	b.Stop()
}

// TestEtcdStatusAcrossHosts: on a store several daemons serve, joining
// and fsck --dry-run do not read like crash recovery; status asked of
// one daemon names the others and tells the store's size on etcd (its
// keys, the cluster's database), not badger's zeros; the metrics export
// etcd's size and no badger gauges.
func TestEtcdStatusAcrossHosts(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	a, sockA := startEtcdServe(t, s, "alice", "bob")
	b, _ := startEtcdServe(t, s, "alice", "bob")
	addr := freeAddr(t)
	v := s.mount(t, "alice", "--metrics", addr)
	for name, d := range map[string]*View{"B": b.View, "the mount": v} {
		if strings.Contains(d.Stderr(), "not closed cleanly") {
			t.Errorf("%s, joining A, logs a crash:\n%s", name, d.Stderr())
		}
	}
	out, errOut, code := runCLI(t, append([]string{"fsck", "--dry-run"}, s.args...)...)
	if code != 0 || strings.Contains(out+errOut, "not closed cleanly") {
		t.Errorf("fsck --dry-run beside three daemons: exit %d\n%s%s", code, out, errOut)
	}

	var st struct {
		Daemons []string `json:"daemons"`
		Size    struct {
			Meta        string `json:"meta"`
			LSMBytes    int64  `json:"lsm_bytes"`
			EtcdKeys    int64  `json:"etcd_keys"`
			EtcdDBBytes int64  `json:"etcd_db_bytes"`
		} `json:"size"`
	}
	js := adminOK(t, append([]string{"status", "--json", "--admin-socket", sockA}, s.args...)...)
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	if len(st.Daemons) != 2 || st.Size.Meta != "etcd" || st.Size.EtcdKeys == 0 || st.Size.EtcdDBBytes == 0 {
		t.Errorf("status --json of A: %d other daemons %v, size %+v; want the 2 others and etcd's size", len(st.Daemons), st.Daemons, st.Size)
	}
	text := adminOK(t, append([]string{"status", "--admin-socket", sockA}, s.args...)...)
	if !strings.Contains(text, "other daemons:") || strings.Contains(text, "LSM") || !strings.Contains(text, "metadata on etcd") {
		t.Errorf("status of A:\n%s", text)
	}
	// Without a daemon asked (the CLI reads the store), the daemons are
	// all others.
	text = adminOK(t, append([]string{"status"}, s.args...)...)
	if !regexp.MustCompile(`daemons elsewhere:\s+3\n`).MatchString(text) {
		t.Errorf("status read by the CLI, beside three daemons:\n%s", text)
	}

	fams := scrape(t, addr)
	for _, name := range []string{"shedfs_badger_lsm_bytes", "shedfs_badger_vlog_bytes"} {
		if fams[name] != nil {
			t.Errorf("%s exported for a store on etcd", name)
		}
	}
	if fams.value(t, "shedfs_etcd_keys") == 0 || fams.value(t, "shedfs_etcd_db_bytes", "kind=size") == 0 {
		t.Errorf("etcd's size not exported: keys %v, db %v", fams.value(t, "shedfs_etcd_keys"), fams.value(t, "shedfs_etcd_db_bytes", "kind=size"))
	}
	v.Stop()
	a.Stop()
	b.Stop()
}
