package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// pLink is the prefix of share-by-link records ('L' id → Link, JSON). A
// link names an inode, never a path, so it follows renames and dies with
// the inode; deleting the record revokes it.
const pLink = 'L'

func linkKey(id string) []byte { return strKey(pLink, id) }

// Link is one share-by-link record: who made it, for which inode, until
// when, and how often it was used. ID is the link's public name (the
// links package's ID string); the token that opens it is signed with the
// store's link key and is not kept.
type Link struct {
	ID   string `json:"id"`
	User string `json:"user"`
	Ino  uint64 `json:"ino"`
	// Dir and Name are where the inode was when the link was made (Dir 0
	// for a directory, which knows its parent): a file's current name
	// is looked up in Dir, and Name stands in when it moved elsewhere.
	Dir       uint64    `json:"dir,omitempty"`
	Name      string    `json:"name,omitempty"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	Downloads uint64    `json:"downloads,omitempty"`
	// UserRoot is the maker's private root when the link was made: a
	// user removed and added again under the same name has another, so
	// a record of the earlier one opens nothing for the new one. 0 in
	// records older than the field.
	UserRoot uint64 `json:"user_root,omitempty"`
	// Key is the KeyID of the link key the link was made under (links.Key):
	// once the key is rotated, the record opens nothing even though a
	// token for it could be signed again. "" in records older than the
	// field.
	Key string `json:"key,omitempty"`
}

// PutLink stores a new link record.
func (s *Store) PutLink(l Link) error {
	if l.ID == "" {
		return fmt.Errorf("link without id: %w", syscall.EINVAL)
	}
	return s.update(func(o *op) error {
		return setJSON(o.tx, linkKey(l.ID), &l)
	})
}

// GetLink returns the link record id, ENOENT if there is none (never made,
// revoked or purged).
func (s *Store) GetLink(id string) (*Link, error) {
	var l Link
	err := s.kv.View(func(tx Txn) error {
		return getJSON(tx, linkKey(id), "link", &l)
	})
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// ListLinks returns every link record, in ID order.
func (s *Store) ListLinks() ([]Link, error) {
	var out []Link
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pLink}, nil, func(k, v []byte) error {
			var l Link
			if err := getJSONBytes(v, "link", &l); err != nil {
				return err
			}
			out = append(out, l)
			return nil
		})
	})
	return out, err
}

// DeleteLink removes the link record id (revoking it), ENOENT if none.
func (s *Store) DeleteLink(id string) error {
	return s.update(func(o *op) error {
		if _, err := o.tx.Get(linkKey(id)); errors.Is(err, ErrNotFound) {
			return syscall.ENOENT
		} else if err != nil {
			return err
		}
		return o.tx.Delete(linkKey(id))
	})
}

// CountDownload adds one download to the link record id.
func (s *Store) CountDownload(id string) error {
	return s.update(func(o *op) error {
		var l Link
		if err := getJSON(o.tx, linkKey(id), "link", &l); err != nil {
			return err
		}
		l.Downloads++
		return setJSON(o.tx, linkKey(id), &l)
	})
}

// PurgeLinks deletes the records of links expired at now and returns how
// many went.
func (s *Store) PurgeLinks(now time.Time) (int, error) {
	return s.DropLinks(func(l Link) bool { return !now.Before(l.Expires) })
}

// DropLinks deletes the link records drop chooses, in batches, and
// returns how many went: the links of a removed user, those made under a
// key that was rotated.
func (s *Store) DropLinks(drop func(Link) bool) (int, error) {
	var ids []string
	err := s.kv.View(func(tx Txn) error {
		ids = ids[:0]
		return tx.Scan([]byte{pLink}, nil, func(k, v []byte) error {
			var l Link
			if err := getJSONBytes(v, "link", &l); err != nil {
				return err
			}
			if drop(l) {
				ids = append(ids, l.ID)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for start := 0; start < len(ids); start += deleteBatch {
		batch := ids[start:min(start+deleteBatch, len(ids))]
		if err := s.update(func(o *op) error {
			for _, id := range batch {
				if err := o.tx.Delete(linkKey(id)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return start, err
		}
	}
	return len(ids), nil
}

// getJSONBytes decodes a scanned JSON value.
func getJSONBytes(v []byte, what string, dst any) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("decode %s: %w: %v", what, ErrCorrupt, err)
	}
	return nil
}

// PlaceLink records where a linked file is now, directory dir and name,
// when it was found elsewhere than its record said: the next request
// looks there first. ENOENT when the link is gone.
func (s *Store) PlaceLink(id string, dir uint64, name string) error {
	return s.update(func(o *op) error {
		var l Link
		if err := getJSON(o.tx, linkKey(id), "link", &l); err != nil {
			return err
		}
		if l.Dir == dir && l.Name == name {
			return nil
		}
		l.Dir, l.Name = dir, name
		return setJSON(o.tx, linkKey(id), &l)
	})
}
