package content

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
)

// Mismatch is a file whose blob no longer has the content its digest was
// made of: bit rot, or a blob changed behind the daemon's back.
type Mismatch struct {
	Ino       uint64
	Zone      string
	Want, Got string
}

// Verify re-reads every blob whose digest is current and calls bad for
// each one that does not match; it returns how many it checked.
func Verify(store *metadata.Store, blobDir *blobs.Dir, bad func(Mismatch)) (int, error) {
	type item struct {
		ino uint64
		sha string
	}
	var items []item
	if err := store.Digests(func(ino uint64, sha string) error {
		items = append(items, item{ino, sha})
		return nil
	}); err != nil {
		return 0, err
	}
	checked := 0
	for _, it := range items {
		n, err := store.GetInode(it.ino)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return checked, err
		}
		f, _, err := openBlob(blobDir, it.ino)
		if err != nil {
			return checked, err
		}
		got, err := HashFile(f)
		f.Close()
		if err != nil {
			return checked, fmt.Errorf("read blob %d: %w", it.ino, err)
		}
		checked++
		if got != it.sha {
			bad(Mismatch{Ino: it.ino, Zone: n.Zone.String(), Want: it.sha, Got: got})
		}
	}
	return checked, nil
}
