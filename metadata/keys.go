package metadata

import (
	"encoding/binary"

	"github.com/shedfs/shedfs"
)

// Key prefixes, one byte per record kind. doc.go documents the layout.
const (
	pVersion = 'V'
	// pInode and pEntry are keyed by allocation order (keyCodec); the
	// stores of schema version 1 kept the same records under pInodeV1 and
	// pEntryV1, keyed by inode number (layout.go).
	pInode   = 'i'
	pEntry   = 'd'
	pInodeV1 = 'I'
	pEntryV1 = 'D'
	pXattr   = 'X'
	pOrphan  = 'O'
	pUser    = 'U'
	pGroup   = 'G'
	pLimit   = 'Q'
	pUsage   = 'C'
	pNextIno = 'N'
	pState   = 'S'
	// The content records (content.go).
	pContent    = 'H'
	pPending    = 'P'
	pQuarantine = 'F'
)

// schemaVersion is the layout this code reads and writes. Version 1
// stores (inode records and entries keyed by inode number) are read as
// they are by a read-only open and migrated by a writable one (layout.go).
const (
	schemaVersion   = 2
	schemaVersionV1 = 1
)

// State record names under pState.
const (
	stateClean     = "clean"
	stateLastCheck = "lastcheck"
	stateShareRoot = "shareroot"
	stateSettings  = "settings"
	stateInoKey    = "inokey"
	// stateBlobLayout is the store's blob placement (placement.go).
	stateBlobLayout = "bloblayout"
	// stateBlobBucket is the bucket that holds the contents (bucket.go).
	stateBlobBucket = "blobbucket"
)

func inoKey(prefix byte, ino uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], ino)
	return k
}

func inoNameKey(prefix byte, ino uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], ino)
	return append(k, name...)
}

func strKey(prefix byte, s string) []byte {
	k := make([]byte, 1, 1+len(s))
	k[0] = prefix
	return append(k, s...)
}

func xattrKey(ino uint64, name string) []byte { return inoNameKey(pXattr, ino, name) }
func xattrPrefix(ino uint64) []byte           { return inoKey(pXattr, ino) }
func orphanKey(ino uint64) []byte             { return inoKey(pOrphan, ino) }
func userKey(name string) []byte              { return strKey(pUser, name) }
func groupKey(name string) []byte             { return strKey(pGroup, name) }
func limitKey(h shedfs.Holder) []byte         { return strKey(pLimit, string(h)) }
func usageKey(h shedfs.Holder) []byte         { return strKey(pUsage, string(h)) }
func stateKey(name string) []byte             { return strKey(pState, name) }
func versionKey() []byte                      { return []byte{pVersion} }
func nextInoKey() []byte                      { return []byte{pNextIno} }

// keyIno reads the inode number that follows the prefix byte of a key.
func keyIno(k []byte) uint64 {
	if len(k) < 9 {
		return 0
	}
	return binary.BigEndian.Uint64(k[1:9])
}
