package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A read-only open must change nothing, yet badger cannot open read-only a
// database whose last process died: its write-ahead log must be replayed
// (and truncated) first. For that case only, the store is read from a
// private copy of its meta/ directory, made under a shared lock (so that no
// writer opens the store meanwhile) in a temporary directory, opened
// read-write there and removed at Close. The copy keeps holes, so the
// preallocated log files cost no disk.

// errNeedsReplay marks a badger open that failed only because the log of an
// unclean stop must be replayed.
var errNeedsReplay = errors.New("the log of an unclean stop must be replayed")

// snapshotKV is a KV over a private copy, removed when closed.
type snapshotKV struct {
	KV
	dir string
}

func (s *snapshotKV) Close() error {
	err := s.KV.Close()
	if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
		err = fmt.Errorf("remove snapshot: %w", rerr)
	}
	return err
}

// openSnapshot opens a private copy of the badger directory dir.
func openSnapshot(dir string, logger *slog.Logger) (KV, error) {
	lock, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, ErrLocked)
	}
	tmp, err := os.MkdirTemp("", "shedfs-snapshot-")
	if err != nil {
		return nil, fmt.Errorf("open store %s read-only: %w", dir, err)
	}
	if err := copyFlatDir(dir, tmp); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("open store %s read-only: copy: %w", dir, err)
	}
	kv, err := openBadger(tmp, false, false, logger)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	logger.Info("store opened read-only through a snapshot (unclean stop)", "dir", dir, "snapshot", tmp)
	return &snapshotKV{KV: kv, dir: tmp}, nil
}

// copyFlatDir copies the regular files of src (badger keeps no
// subdirectories) into dst.
func copyFlatDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copySparse(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copySparse copies one file, leaving holes where src reads as zeros.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	var size int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				if _, err := out.Seek(int64(n), io.SeekCurrent); err != nil {
					out.Close()
					return err
				}
			} else if _, err := out.Write(buf[:n]); err != nil {
				out.Close()
				return err
			}
			size += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
