package acl

import (
	"math"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestOvershoot: how far a holder is above its limit, per resource; 0
// within it and for an unlimited (0) limit (issue 27: a limit set below
// the usage was silent until fsck failed).
func TestOvershoot(t *testing.T) {
	u := func(b, i int64) shedfs.Usage { return shedfs.Usage{Bytes: b, Inodes: i} }
	l := func(b, i int64) shedfs.Limit { return shedfs.Limit{Bytes: b, Inodes: i} }
	for _, c := range []struct {
		name  string
		usage shedfs.Usage
		limit shedfs.Limit
		want  shedfs.Usage
	}{
		{"within", u(10, 2), l(20, 3), u(0, 0)},
		{"at_limit", u(20, 3), l(20, 3), u(0, 0)},
		{"unlimited", u(1<<40, 1e9), l(0, 0), u(0, 0)},
		{"bytes_over", u(30, 2), l(20, 3), u(10, 0)},
		{"inodes_over", u(10, 5), l(20, 3), u(0, 2)},
		{"both_over", u(30, 5), l(20, 3), u(10, 2)},
		{"bytes_unlimited_inodes_over", u(30, 5), l(0, 3), u(0, 2)},
		{"huge", u(math.MaxInt64, 0), l(1, 0), u(math.MaxInt64-1, 0)},
	} {
		if got := Overshoot(c.usage, c.limit); got != c.want {
			t.Errorf("%s: Overshoot(%+v, %+v) = %+v, want %+v", c.name, c.usage, c.limit, got, c.want)
		}
	}
}
