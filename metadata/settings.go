package metadata

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// Settings are the store-wide policy values that belong to the data, not
// to one daemon run: the quota a new user or group starts with and the
// largest file anyone may write. Kept in the store, they survive restarts
// and are the same for every view.
type Settings struct {
	// DefaultUserLimit is the quota a new user gets (zero: unlimited).
	DefaultUserLimit shedfs.Limit `json:"default_user_limit"`
	// DefaultGroupLimit is the quota a new group gets (zero: unlimited).
	DefaultGroupLimit shedfs.Limit `json:"default_group_limit"`
	// MaxFileSize is the largest size a regular file may reach (0: no
	// limit but the format's).
	MaxFileSize uint64 `json:"max_file_size"`
	// DefaultLinkTTL is how long a new share-by-link link lives when
	// its maker names no lifetime (0: the links package's default).
	DefaultLinkTTL time.Duration `json:"default_link_ttl,omitempty"`
	// TrashRetentionSeconds is how long the trash keeps a file (nil: the
	// default, DefaultTrashRetention; 0: the trash is off).
	TrashRetentionSeconds *int64 `json:"trash_retention_seconds,omitempty"`
}

// GetSettings returns the store's settings (zero values when never set).
func (s *Store) GetSettings() (Settings, error) {
	var st Settings
	err := s.kv.View(func(tx Txn) error {
		return readSettings(tx, &st)
	})
	return st, err
}

// SetSettings replaces the store's settings. Changing the defaults does
// not touch the limits of existing users and groups.
func (s *Store) SetSettings(st Settings) error {
	if st.DefaultUserLimit.Bytes < 0 || st.DefaultUserLimit.Inodes < 0 ||
		st.DefaultGroupLimit.Bytes < 0 || st.DefaultGroupLimit.Inodes < 0 {
		return fmt.Errorf("settings: negative limit: %w", syscall.EINVAL)
	}
	return s.update(func(o *op) error {
		return setJSON(o.tx, stateKey(stateSettings), &st)
	})
}

func readSettings(tx Txn, st *Settings) error {
	err := getJSON(tx, stateKey(stateSettings), "settings", st)
	if errors.Is(err, syscall.ENOENT) {
		*st = Settings{}
		return nil
	}
	return err
}

// applyDefaultLimit gives a new holder the default limit of its kind, in
// the transaction that creates it.
func (o *op) applyDefaultLimit(h shedfs.Holder, group bool) error {
	var st Settings
	if err := readSettings(o.tx, &st); err != nil {
		return err
	}
	l := st.DefaultUserLimit
	if group {
		l = st.DefaultGroupLimit
	}
	if l == (shedfs.Limit{}) {
		return nil
	}
	return o.tx.Set(limitKey(h), encodePair(l.Bytes, l.Inodes))
}
