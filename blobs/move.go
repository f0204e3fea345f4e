package blobs

import (
	"fmt"
	"os"
)

// Move gives the blob of from to inode number to, with one rename(2) and
// no copy: the trash keeps a file's old content under a new inode number
// when the file is truncated. to must have no blob.
func (d *Dir) Move(from, to uint64) error {
	if d.remote != nil {
		return d.remote.move(from, to)
	}
	if err := d.mkShard(to); err != nil {
		return err
	}
	if err := os.Rename(d.Path(from), d.Path(to)); err != nil {
		return fmt.Errorf("move blob %d to %d: %w", from, to, err)
	}
	return nil
}
