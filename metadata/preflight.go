package metadata

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"google.golang.org/protobuf/proto"
)

// preflightTables checks the footer and index checksum of every badger
// table in dir before badger opens them. Badger opens tables on its own
// goroutines and panics there on a damaged footer, which no recover in the
// caller can catch; a damaged store must be ErrCorrupt, not a dead daemon.
// The layout read here is badger's table footer: ... index, index length
// (u32 BE), checksum (protobuf), checksum length (u32 BE).
//
// Only the tables the manifest lists are badger's: a kill -9 while badger
// writes a new table (a flush or a compaction) leaves its file, empty or
// half written, outside the manifest, and badger deletes such a file when
// it opens the store. When the manifest cannot be read, every table is
// checked (badger then reports the manifest itself).
func preflightTables(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return err
	}
	listed := manifestTables(dir)
	for _, name := range names {
		if listed != nil {
			id, ok := table.ParseFileID(name)
			if _, in := listed[id]; ok && !in {
				continue
			}
		}
		if err := preflightTable(name); err != nil {
			return fmt.Errorf("table %s: %w: %v", filepath.Base(name), ErrCorrupt, err)
		}
	}
	return nil
}

// manifestTables is the set of table ids dir's manifest lists, or nil
// when it cannot be read.
func manifestTables(dir string) map[uint64]badger.TableManifest {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir))
	if err != nil {
		return nil
	}
	return m.Tables
}

func preflightTable(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	readU32 := func(off int64) (int64, error) {
		if off < 0 || off+4 > size {
			return 0, fmt.Errorf("footer out of bounds")
		}
		var b [4]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			return 0, err
		}
		return int64(binary.BigEndian.Uint32(b[:])), nil
	}
	pos := size - 4
	ckLen, err := readU32(pos)
	if err != nil {
		return err
	}
	pos -= ckLen
	if pos < 4 || ckLen > 1<<20 {
		return fmt.Errorf("checksum length %d out of bounds", ckLen)
	}
	ckBuf := make([]byte, ckLen)
	if _, err := f.ReadAt(ckBuf, pos); err != nil {
		return err
	}
	var ck pb.Checksum
	if err := proto.Unmarshal(ckBuf, &ck); err != nil {
		return fmt.Errorf("checksum record: %v", err)
	}
	pos -= 4
	idxLen, err := readU32(pos)
	if err != nil {
		return err
	}
	pos -= idxLen
	if pos < 0 {
		return fmt.Errorf("index length %d out of bounds", idxLen)
	}
	idx := make([]byte, idxLen)
	if _, err := f.ReadAt(idx, pos); err != nil && err != io.EOF {
		return err
	}
	if err := y.VerifyChecksum(idx, &ck); err != nil {
		return fmt.Errorf("index checksum: %v", strings.TrimSpace(err.Error()))
	}
	return nil
}
