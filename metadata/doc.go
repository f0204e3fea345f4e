// Package metadata is the namespace of a shedfs store, kept in an embedded
// badger database: inodes, directory entries, extended attributes,
// principals, quotas and usage, and the store's own state.
//
// It exists so that nothing else ever derives a host path from a name a user
// chose: file contents live in blobs named by inode number, and every name,
// link, owner, mode and zone lives here. Every multi-key change (create,
// link, unlink, rename, reclaim, principal changes, usage charges) is one
// transaction, so a crash leaves either the old or the new state. Badger is
// reached only through the narrow KV/Txn seam (kv.go), so a distributed KV
// can hold the same schema later.
//
// # Key schema (version 2)
//
// One prefix byte per record kind; inode numbers are 8-byte big-endian, so
// one directory's entries (or one inode's xattrs) are a single prefix scan
// in name order. Inode records and directory entries are keyed by
// allocation order ("ord" below: the inode number's counter value plus
// 2^32, see "Inode numbers" and layout.go), so that records made together
// lie together; every other key, and every value, holds the inode number.
//
//	key                          value
//	'V'                          schema version, uint64 BE (2); version 1 is migrated by a writable open, Open refuses others (ErrSchema)
//	'i' ord                      inode, binary: version byte 1, mode uid gid nlink rdev (u32),
//	                             size parent (u64), atime mtime ctime (i64 sec + u32 nsec),
//	                             zone kind, own mode (u8), then uvarint-length strings
//	                             target, zone principal, owner
//	'd' ord(parent) name         child ino (u64 BE) + file type byte (S_IFMT >> 12)
//	'I' ino, 'D' parent name     version 1's keys of the same records; none left in a version 2 store
//	'X' ino name                 xattr value (raw bytes)
//	'O' ino                      empty: inode has Nlink 0 and awaits Reclaim
//	'U' name                     User, JSON
//	'G' name                     Group (with members), JSON
//	'Q' holder                   Limit: bytes, inodes (i64 BE each)
//	'C' holder                   Usage: bytes, inodes (i64 BE each)
//	'N'                          next unleased value of the inode allocation counter, u64 BE
//	'S' "clean"                  1 byte: 1 closed cleanly, 0 open (dirty)
//	'S' "lastcheck"              CheckRecord, JSON
//	'S' "shareroot"              inode of the share root, u64 BE
//	'S' "settings"               Settings (default limits, max file size), JSON
//	'S' "inokey"                 16 random bytes: the key of the inode number permutation
//	'S' "bloblayout"             1 byte: where blobs lie (placement.go); absent in stores made before it: by inode number
//	'L' id                       share-by-link record (Link: user, inode, created, expires, downloads), JSON
//	'H' ino                      content: digest, scan state and detail, the pending mark it was made for; JSON
//	'P' ino                      content changed, awaiting digest and scan: mark generation, writer; JSON
//	'F' ino                      quarantined (infected): the signature
//	'A' nanos seq                audit record (unix nanos u64 BE, seq u32 BE), short-named JSON; bare 'A': record count, u64 BE
//	'T' holder 0x00 nanos ino    trash record: a kept file (trash.go), JSON; oldest first per holder
//	't' ino                      the 'T' key of the kept inode's record
//	'b' ino                      birth of the inode, unix nanos u64 BE (history.go)
//	'r' nanos ino                journal of name changes: zone, kind, paths within it, JSON (history.go)
//	'W' user 0x00 id             an open session: scratch root, placeholder, created, expires; JSON (session.go)
//	'w' user 0x00 id             a session close under way: the session, keep; JSON (session.go)
//	'f' root member              empty: member's blob was forked from root's (u64 BE each; fork.go)
//	'g' member                   root of member's fork group, u64 BE (fork.go)
//
// Holders are "user:<name>", "group:<name>", "share" and
// "session:<user>/<id>", which nests in its user: every charge to it is
// made to "user:<user>" as well, in the same transaction. Zone roots are
// directories with Parent 0 that no entry names; the share root is found
// through 'S' "shareroot", the others through their principal's record.
//
// # Inode numbers
//
// Every process in a view sees inode numbers (stat, readdir), so they must
// reveal nothing about other holders' activity: with sequential numbers,
// the gap between two of carol's files counts the files alice created
// meanwhile in a group carol cannot see. An allocation counter starts at
// FirstIno and is leased in ranges of 1024 (one small transaction on 'N'
// per range), then handed out from memory, so creates never contend on one
// counter key; values of a lease unused at a crash are skipped. Each
// counter value c becomes the inode number P(2^32 + c), where P is a keyed
// pseudorandom permutation of the 64-bit space (an 8-round Feistel network
// over 32-bit halves, AES-128 as round function, keyed by 'S' "inokey",
// made at random when the store is created), cycle-walked (P applied again)
// until the result is not reserved. Reserved are the numbers below 2^32
// and the top two, math.MaxUint64-1 (SyntheticIno, the groups/ directory
// of every view) and math.MaxUint64. Distinct counter values give distinct
// numbers; numbers are stored in the records, never recomputed, so they
// are stable; and without the key, two numbers say nothing about how many
// were allocated between them. The keys of inode records and entries hold
// the inverse, the order (layout.go): the permutation is a bijection, so
// the key names the number, and only the store, which has the key, reads
// the order. The reserved range keeps FUSE's root node
// ID 1 (views use inode numbers as node IDs) and the numbers a view uses
// for itself (below FirstIno) free, and holds the sequential numbers of
// stores made before numbers were permuted (the counter itself, from
// FirstIno up): such a store gets its key at its next open, keeps its
// numbers, and new numbers never meet them. Blob shards (blobs/ab/cd/<ino>)
// take the low bytes of the number, which the permutation spreads evenly.
// Numbers above 2^32 need 64-bit stat; a 32-bit program built without
// large-file support gets EOVERFLOW. Check decodes every number back to its
// counter value and raises 'N' past the highest, so later allocations stay
// unique.
//
// Usage counts every inode of a holder's zones (roots included) and
// Charge(size) bytes per regular file; a hard-linked inode counts once.
// It changes in the same transaction as the inode change that causes it.
package metadata
