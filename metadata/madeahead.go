package metadata

import (
	"fmt"
	"syscall"
)

// CreateOpenAt is CreateOpen for a regular file whose inode number ino the
// caller already took from AllocIno, because its blob was made ahead under
// that number (blobs.Pool); ino 0 allocates one as CreateOpen does. A
// failed create leaves ino unused, and the caller must not offer it again.
func (s *Store) CreateOpenAt(ino, parent uint64, name string, tmpl *Inode, admit func(Usage, Limit) error) (*Inode, error) {
	if tmpl == nil || tmpl.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("create %q: not a regular file: %w", name, syscall.EINVAL)
	}
	if name != "" {
		if err := ValidName(name); err != nil {
			return nil, err
		}
	}
	return s.createAt(ino, parent, name, tmpl, admit, true)
}
