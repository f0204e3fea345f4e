package web

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/shedfs/shedfs/links"
)

// KeyFile is the name of the link key in the store directory: 32 random
// bytes, mode 0600, made at the first link. Replacing it (RotateKey)
// invalidates every link. It is never made again while links made under
// it live (Service.signingKey), and shedfs migrate carries it (CopyKey).
const KeyFile = "links.key"

// LoadKey reads the link key of the store in dir; an error wrapping
// fs.ErrNotExist when there is none. A key readable by others is made
// private again (and logged).
func LoadKey(dir string, log *slog.Logger) (links.Key, error) {
	p := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	if len(b) != links.KeySize {
		return nil, fmt.Errorf("link key %s: %d bytes, want %d (rotate-key makes a new one)", p, len(b), links.KeySize)
	}
	if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("link key was readable by others; made private", "path", p, "mode", fi.Mode().Perm())
		if err := os.Chmod(p, 0o600); err != nil {
			return nil, fmt.Errorf("link key: %w", err)
		}
	}
	return links.Key(b), nil
}

// RotateKey writes a new link key for the store in dir and returns it.
func RotateKey(dir string) (links.Key, error) { return writeKey(dir, true, nil) }

// CopyKey puts the link key of the store directory from into directory to
// (shedfs migrate: a store on etcd keeps it beside its blobs), so that the
// links made before keep working. Nothing to copy is no error; a
// different key already in to is one, never overwritten.
func CopyKey(from, to string) error {
	k, err := LoadKey(from, slog.New(slog.DiscardHandler))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	there, err := LoadKey(to, slog.New(slog.DiscardHandler))
	switch {
	case err == nil && bytes.Equal(there, k):
		return nil
	case err == nil:
		return fmt.Errorf("link key: %s already holds another key; move it away to carry %s",
			filepath.Join(to, KeyFile), filepath.Join(from, KeyFile))
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	got, err := writeKey(to, false, k)
	if err == nil && !bytes.Equal(got, k) {
		return fmt.Errorf("link key: another key appeared in %s meanwhile", filepath.Join(to, KeyFile))
	}
	return err
}

// writeKey writes key k (nil: a fresh one) durably: a private temporary
// file renamed over the old key (replace), or put where none was.
func writeKey(dir string, replace bool, k links.Key) (links.Key, error) {
	if k == nil {
		var err error
		if k, err = links.NewKey(); err != nil {
			return nil, err
		}
	}
	p := filepath.Join(dir, KeyFile)
	tmp, err := os.CreateTemp(dir, KeyFile+".*")
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("link key: %w", err)
	}
	if _, err := tmp.Write(k); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("link key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("link key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	if replace {
		err = os.Rename(tmp.Name(), p)
	} else if err = os.Link(tmp.Name(), p); errors.Is(err, fs.ErrExist) {
		// Another process made it first: use theirs.
		return LoadKey(dir, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return k, nil
}
