package blobs

// Placement decides which of the 65,536 shard directories holds the blob of
// an inode, from the inode number alone (no name a user chose reaches the
// host). The zero Placement spreads blobs by the low bytes of the number
// (blobs/<byte 0>/<byte 1>/<ino>), the layout of stores made before
// placement by allocation order.
//
// With Order set, a blob goes to the shard of its allocation order divided
// by PerShard: inode numbers are permuted (metadata/inos.go), so by number
// consecutive creates land in scattered, cold host directories and a young
// store makes a new one on nearly every create; by allocation order they
// fill one warm directory after another, with a mkdir once per PerShard
// creates. The host sees the order files were made in, which only the
// daemon can read.
type Placement struct {
	// Order maps an inode number back to the allocation counter value it
	// was made from; false (a number no counter yields) falls back to the
	// low bytes of the number.
	Order func(ino uint64) (uint64, bool)
}

// PerShard is how many consecutively allocated inodes share one shard
// directory under a Placement with Order.
const PerShard = 256

// shard is the shard directory number of ino: its high byte names the
// first level, its low byte the second.
func (p Placement) shard(ino uint64) uint16 {
	if p.Order != nil {
		if c, ok := p.Order(ino); ok {
			return uint16(c / PerShard)
		}
	}
	return uint16(ino&0xff)<<8 | uint16(ino>>8&0xff)
}
