package metadata

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// pEditLock is the prefix of edit lock records ('E' ino → EditLock,
// JSON): the agent doors' lock_open, which every door then honours
// (acl.CheckEditLock). They live in the store, not in a daemon, so they
// outlive a restart and bind every daemon of a shared store; each ends by
// itself at its expiry.
const pEditLock = 'E'

func editLockKey(ino uint64) []byte { return inoKey(pEditLock, ino) }

// EditLock is one edit lock: on which file, held by whom (a user's view,
// or one session of it), through which door, since and until when. Path
// is where the file was when the lock was taken, for listings.
type EditLock struct {
	Ino     uint64    `json:"ino"`
	User    string    `json:"user"`
	Session string    `json:"session,omitempty"`
	Door    string    `json:"door,omitempty"`
	Path    string    `json:"path,omitempty"`
	Taken   time.Time `json:"taken"`
	Expires time.Time `json:"expires"`
}

// ErrEditLocked is TakeEditLock's answer when another holder has the lock.
var ErrEditLocked = fmt.Errorf("the file is being edited by another holder: %w", syscall.EBUSY)

// TakeEditLock takes, or renews for the same holder, the edit lock l on
// l.Ino at now. When another holder has it and it has not expired, it
// answers that lock and ErrEditLocked.
func (s *Store) TakeEditLock(l EditLock, now time.Time) (*EditLock, error) {
	if l.Ino == 0 || l.User == "" || !now.Before(l.Expires) {
		return nil, fmt.Errorf("edit lock without a file, a holder or a lifetime: %w", syscall.EINVAL)
	}
	var held *EditLock
	err := s.update(func(o *op) error {
		var cur EditLock
		switch err := getJSON(o.tx, editLockKey(l.Ino), "edit lock", &cur); {
		case err == nil:
			if now.Before(cur.Expires) && (cur.User != l.User || cur.Session != l.Session) {
				held = &cur
				return ErrEditLocked
			}
			if now.Before(cur.Expires) {
				l.Taken = cur.Taken // a renewal
			}
		case !errors.Is(err, syscall.ENOENT):
			return err
		}
		return setJSON(o.tx, editLockKey(l.Ino), &l)
	})
	if held != nil {
		return held, ErrEditLocked
	}
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// GetEditLock returns the edit lock record of ino, ENOENT if none. The
// record may have expired: the caller decides at its own now.
func (s *Store) GetEditLock(ino uint64) (*EditLock, error) {
	var l EditLock
	if err := s.kv.View(func(tx Txn) error { return getJSON(tx, editLockKey(ino), "edit lock", &l) }); err != nil {
		return nil, err
	}
	return &l, nil
}

// ReleaseEditLock deletes the edit lock of ino if may, given the record,
// allows it (nil: always); ENOENT if there is none.
func (s *Store) ReleaseEditLock(ino uint64, may func(EditLock) error) (*EditLock, error) {
	var l EditLock
	err := s.update(func(o *op) error {
		if err := getJSON(o.tx, editLockKey(ino), "edit lock", &l); err != nil {
			return err
		}
		if may != nil {
			if err := may(l); err != nil {
				return err
			}
		}
		return o.tx.Delete(editLockKey(ino))
	})
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// ListEditLocks returns every edit lock record, expired ones included,
// by inode.
func (s *Store) ListEditLocks() ([]EditLock, error) {
	var out []EditLock
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pEditLock}, nil, func(k, v []byte) error {
			var l EditLock
			if err := getJSONBytes(v, "edit lock", &l); err != nil {
				return err
			}
			out = append(out, l)
			return nil
		})
	})
	return out, err
}

// PurgeEditLocks deletes the records of edit locks expired at now and
// returns how many went.
func (s *Store) PurgeEditLocks(now time.Time) (int, error) {
	ls, err := s.ListEditLocks()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range ls {
		if now.Before(l.Expires) {
			continue
		}
		_, err := s.ReleaseEditLock(l.Ino, func(cur EditLock) error {
			if now.Before(cur.Expires) {
				return syscall.EAGAIN // renewed meanwhile
			}
			return nil
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EAGAIN):
		default:
			return n, err
		}
	}
	return n, nil
}
