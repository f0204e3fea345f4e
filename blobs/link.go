package blobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Link gives the blob of from to inode number to as well, with one
// link(2) and no copy: closing a session renumbers its files into the
// user's private zone (docs/design.md, "Sessions"), and the old number's
// blob goes only once the store names the new one. to must have no blob;
// from having none (a file never written) links nothing.
func (d *Dir) Link(from, to uint64) error {
	if d.remote != nil {
		return d.remote.link(from, to)
	}
	if err := d.mkShard(to); err != nil {
		return err
	}
	if err := os.Link(d.Path(from), d.Path(to)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("link blob %d to %d: %w", from, to, err)
	}
	return nil
}
