package daemon

import (
	"os"
	"strings"
	"testing"
)

// TestCheckCopyLeftovers: the copy of a shared blob that a crash kept
// from taking the blob's place is reported by fsck's snapshot check and
// removed by a repair; the blob stays.
func TestCheckCopyLeftovers(t *testing.T) {
	st := openTestStore(t)
	b, err := st.Blobs.OpenFile(123, true)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	left := st.Blobs.CopyPath(123)
	if err := os.WriteFile(left, []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps, err := CheckSnapshots(st, false)
	if err != nil || len(ps) != 1 || ps[0].Repaired || !strings.Contains(ps[0].Detail, "copy-up leftover") {
		t.Fatalf("check: %+v %v", ps, err)
	}
	if ps, err = CheckSnapshots(st, true); err != nil || len(ps) != 1 || !ps[0].Repaired {
		t.Fatalf("repair: %+v %v", ps, err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("leftover after the repair: %v", err)
	}
	if _, err := os.Stat(st.Blobs.Path(123)); err != nil {
		t.Fatalf("the blob went with the leftover: %v", err)
	}
	if ps, err = CheckSnapshots(st, false); err != nil || len(ps) != 0 {
		t.Fatalf("check after the repair: %+v %v", ps, err)
	}
}
