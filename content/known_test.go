package content

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestKnown: a digest computed by the writer is the whole content record
// only where no scan applies: without a scanner, in a zone not scanned,
// above the size limit; a file to be scanned is queued instead.
func TestKnown(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	want := shedfs.Content{SHA256: hex.EncodeToString(sum[:]), State: shedfs.ScanUnscanned}
	groups, err := ParseZones("group")
	if err != nil {
		t.Fatal(err)
	}
	share, group := shedfs.Zone{Kind: shedfs.ZoneShare}, shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "a"}
	for _, tt := range []struct {
		name  string
		opts  Options
		zone  shedfs.Zone
		size  uint64
		known bool
	}{
		{"no scanner", Options{}, share, 1, true},
		{"scanned", Options{Scanner: stuck{}}, share, 1, false},
		{"zone not scanned", Options{Scanner: stuck{}, ScanZone: groups}, share, 1, true},
		{"zone scanned", Options{Scanner: stuck{}, ScanZone: groups}, group, 1, false},
		{"over the scan size", Options{Scanner: stuck{}, MaxSize: 4}, share, 5, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(nil, nil, tt.opts)
			c, ok := s.Known(tt.zone, tt.size, sum[:])
			if ok != tt.known || (ok && c != want) {
				t.Errorf("Known: %+v, %v; want known %v", c, ok, tt.known)
			}
		})
	}
}
