package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
)

// migrateBatch bounds one etcd transaction of a migration: well under
// etcd's default request size (1.5 MiB) and the --max-txn-ops the README
// asks for.
const (
	migrateBatchKeys  = 512
	migrateBatchBytes = 1 << 20
)

// MigrateStats is what a migration copied.
type MigrateStats struct {
	Records int
	Bytes   int64
}

// MigrateToEtcd copies every record of the embedded store in dir (its
// meta/ directory) to an empty prefix of an etcd cluster, so that the
// same namespace, principals, limits, usage, settings and audit trail are
// served from etcd, with the same inode numbers and so the same blobs.
// The source is opened read-only and must have been closed cleanly (no
// daemon serving it, fsck after a crash); the target must be empty. The
// schema version record is written last, so a copy cut short is refused
// by every open ("no schema version record") instead of being served half
// made.
func MigrateToEtcd(dir string, cfg EtcdConfig, logger *slog.Logger) (MigrateStats, error) {
	var st MigrateStats
	src, err := Open(dir, Options{ReadOnly: true, Logger: logger})
	if err != nil {
		return st, fmt.Errorf("migrate: source: %w", err)
	}
	defer src.Close()
	if !src.WasClean() {
		return st, fmt.Errorf("migrate: source %s was not closed cleanly: run shedfs fsck on it first", dir)
	}
	dst, err := openEtcd(cfg, logger, false)
	if err != nil {
		return st, fmt.Errorf("migrate: target: %w", err)
	}
	defer dst.Close()
	empty := true
	if err := dst.View(func(tx Txn) error {
		return tx.Scan(nil, nil, func(_, _ []byte) error {
			empty = false
			return errStopScan
		})
	}); err != nil {
		return st, fmt.Errorf("migrate: target: %w", err)
	}
	if !empty {
		return st, fmt.Errorf("migrate: target prefix %s is not empty (a store, or a copy cut short: etcdctl del --prefix %s removes it)", cfg.Prefix, cfg.Prefix)
	}

	type kv struct{ k, v []byte }
	var batch []kv
	var batchBytes int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := dst.Update(func(tx Txn) error {
			for _, r := range batch {
				if err := tx.Set(r.k, r.v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate: write to etcd: %w", err)
		}
		batch, batchBytes = batch[:0], 0
		return nil
	}
	var version []byte
	err = src.kv.View(func(tx Txn) error {
		return tx.Scan(nil, nil, func(k, v []byte) error {
			switch {
			case bytes.Equal(k, versionKey()):
				version = bytes.Clone(v)
				return nil
			case bytes.Equal(k, stateKey(stateClean)):
				return nil // written with the version, as clean
			}
			batch = append(batch, kv{bytes.Clone(k), bytes.Clone(v)})
			batchBytes += len(k) + len(v)
			st.Records++
			st.Bytes += int64(len(k) + len(v))
			if len(batch) >= migrateBatchKeys || batchBytes >= migrateBatchBytes {
				return flush()
			}
			return nil
		})
	})
	if err != nil {
		return st, fmt.Errorf("migrate: read %s: %w", dir, err)
	}
	if err := flush(); err != nil {
		return st, err
	}
	if version == nil {
		return st, errors.New("migrate: the source has no schema version record")
	}
	if err := dst.Update(func(tx Txn) error {
		if err := tx.Set(stateKey(stateClean), []byte{1}); err != nil {
			return err
		}
		return tx.Set(versionKey(), version)
	}); err != nil {
		return st, fmt.Errorf("migrate: write the schema version: %w", err)
	}
	st.Records += 2
	return st, nil
}
