package metadata

import (
	"log/slog"
	"time"

	"github.com/shedfs/shedfs/internal/maptrim"
)

// Badger reads its tables (*.sst) through shared memory maps, and every
// page a lookup touched stays mapped, and counted in the daemon's RSS, until
// the table goes: inode numbers are spread at random over the key space
// (docs/design.md, "Store layout"), so a stat of 100,000 files of a store of
// a million touched nearly all its inode records, 55 MiB of tables. Every
// tableTrimEvery, once the daemon's file-backed RSS is over fileRSSBudget
// and its whole RSS over rssBudget, the pages of the table maps are handed
// back to the kernel (internal/maptrim); a later read of one takes it
// again from the disk (MADV_PAGEOUT drops it from the page cache too).
const (
	// fileRSSBudget is the file-backed RSS past which the table maps
	// are trimmed: the daemon's binary (about 20 MiB of it is resident
	// once a view has served every kind of request), and room for the
	// indexes and bloom filters a lookup reads in every table (about 5%
	// of the tables) and the blocks in use.
	fileRSSBudget = 40 << 20
	// rssBudget is the whole RSS below which the maps are not trimmed:
	// the bench's target (200 MiB with a 1,000,000-inode store) less
	// what the maps grew by between two trims (15 MiB in 100 ms by plain
	// reads; a compaction grows them faster, see tableTrimEvery)
	// and a margin. With the file budget alone, a listing or lookups in
	// a directory of 100,000 entries (the dirscale workload), whose
	// records do not fit the metadata cache, had the tables they read
	// paged out ten times a second at an RSS near 100 MiB, and read
	// them from the disk again: the daemon took 2.8-3.9 s of CPU for
	// 10,000 lookups against 1.3-2.6 s without the trims.
	rssBudget = 150 << 20
	// tableTrimEvery is how often the maps are measured (reading RssFile
	// from /proc/self/status costs a few µs). Uncompressed tables (see
	// tableSize) are about twice the pages for the same records, and a
	// stat of 100,000 files of the rss store then grew the file-backed
	// RSS to 149 MiB between two trims a second apart (peak RSS 211-231 MiB);
	// at 200 ms the bench's rss workload peaked at 197 and 208 MiB, at
	// 100 ms at 172 and 181 MiB. On a store freshly filled by the bench
	// (four tables in level 0, so that opening it starts a compaction
	// through every level, whose reads touch the maps fastest) 100 ms
	// peaked at 202-205 MiB in four runs of the same stat (200 and 211
	// on a copy with level 0 compacted first), 50 ms at 188 and 210
	// (187, 187), 25 ms at 181 and 189 (173, 174). The measurement is
	// 40 reads a second of a few µs each.
	tableTrimEvery = 25 * time.Millisecond
)

// tableTrimmer trims the table maps of one open database until stop.
type tableTrimmer struct {
	stop chan struct{}
	done chan struct{}
}

// startTableTrimmer starts trimming the maps of the tables in dir.
func startTableTrimmer(dir string, logger *slog.Logger) *tableTrimmer {
	t := &tableTrimmer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(tableTrimEvery)
		defer tick.Stop()
		warned := false
		for {
			select {
			case <-t.stop:
				return
			case <-tick.C:
			}
			if _, err := maptrim.Trim(dir, ".sst", fileRSSBudget, rssBudget); err != nil && !warned {
				warned = true
				logger.Warn("metadata: cannot trim the table maps", "err", err)
			}
		}
	}()
	return t
}

// close stops the trimming and waits for it.
func (t *tableTrimmer) close() {
	if t == nil {
		return
	}
	close(t.stop)
	<-t.done
}
