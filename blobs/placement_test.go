package blobs

import (
	"path/filepath"
	"testing"
)

// A stand-in for the store's permutation (metadata/inos.go): inode numbers
// are counter values times an odd constant, which the inverse undoes.
var (
	permMul uint64 = 0x9e3779b97f4a7c15
	permInv uint64 = 0xf1de83e19937733d // permMul * permInv == 1 mod 2^64
)

func numberOf(c uint64) uint64 { return c * permMul }

// orderOf inverts numberOf; 0x1234 stands for a number no counter made.
func orderOf(ino uint64) (uint64, bool) { return ino * permInv, ino != 0x1234 }

func TestPlacement(t *testing.T) {
	if permMul*permInv != 1 {
		t.Fatal("test permutation is not invertible")
	}
	byOrder := Placement{Order: orderOf}
	tests := []struct {
		name string
		p    Placement
		ino  uint64
		want string
	}{
		{"by number", Placement{}, 0x1234, "34/12"},
		{"by number, high bytes ignored", Placement{}, 0xffff_0000_5678, "78/56"},
		{"no order: by number", byOrder, 0x1234, "34/12"},
		{"order 0", byOrder, numberOf(0), "00/00"},
		{"order 255", byOrder, numberOf(255), "00/00"},
		{"order 256", byOrder, numberOf(256), "00/01"},
		{"order 65536", byOrder, numberOf(65536), "01/00"},
		{"last shard", byOrder, numberOf(1<<24 - 1), "ff/ff"},
		{"wraps after 2^24", byOrder, numberOf(1<<24 + 5), "00/00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.p.shard(tt.ino)
			if got := hexByte(s>>8) + "/" + hexByte(s&0xff); got != tt.want {
				t.Errorf("shard of %#x: %s, want %s", tt.ino, got, tt.want)
			}
		})
	}
}

// TestPlacedDir: consecutive allocations share one host directory, and
// every operation finds the blob where the placement put it.
func TestPlacedDir(t *testing.T) {
	d, err := OpenDirPlaced(filepath.Join(t.TempDir(), "blobs"), Placement{Order: orderOf})
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]int{}
	for c := range uint64(2 * PerShard) {
		b, err := d.Open(numberOf(c), true)
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		dirs[filepath.Dir(d.Path(numberOf(c)))]++
	}
	if len(dirs) != 2 {
		t.Fatalf("%d creates in %d shard directories, want 2: %v", 2*PerShard, len(dirs), dirs)
	}
	if err := d.Move(numberOf(5), numberOf(1000)); err != nil {
		t.Fatal(err)
	}
	if err := d.Link(numberOf(1000), numberOf(70000)); err != nil {
		t.Fatal(err)
	}
	if err := d.Truncate(numberOf(1000), 3); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := d.Each(func(ino uint64, size int64) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 2*PerShard+1 {
		t.Fatalf("each saw %d blobs, want %d", n, 2*PerShard+1)
	}
	if size, err := d.Size(numberOf(70000)); err != nil || size != 3 {
		t.Fatalf("size of the linked blob: %d, %v; want 3", size, err)
	}
}
