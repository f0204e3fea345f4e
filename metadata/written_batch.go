package metadata

import "fmt"

// WrittenUpdate is one file's content change in UpdateWrittenBatch: fn
// sets what its writes moved (size, times), Known is its digest and
// verdict when they are known (UpdateWrittenKnown), nil to mark it
// pending for writer's view (UpdateWritten).
type WrittenUpdate struct {
	Ino    uint64
	Writer string
	Known  *Content
	Fn     func(n *Inode) error
}

// UpdateWrittenBatch persists the content changes of several files in one
// transaction, each as UpdateWritten or UpdateWrittenKnown would (no
// admission: what they charge was admitted as it was written). A commit
// costs the same for one record as for a few, and the files released one
// after another by a small-file writer would otherwise pay one each
// (docs/design.md section 8, "One worker's create chain"). If any of them
// fails, none is persisted and the error names that file.
func (s *Store) UpdateWrittenBatch(us []WrittenUpdate) error {
	return s.update(func(o *op) error {
		for _, u := range us {
			also := func(o *op) error { return o.markPending(u.Ino, u.Writer) }
			if u.Known != nil {
				c := *u.Known
				also = func(o *op) error { return o.setKnown(u.Ino, c) }
			}
			if _, err := o.updateInode(u.Ino, u.Fn, nil, also); err != nil {
				return fmt.Errorf("persist inode %d: %w", u.Ino, err)
			}
		}
		return nil
	})
}
