package fusefs

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func TestLabels(t *testing.T) {
	for _, c := range []struct {
		e    syscall.Errno
		want string
	}{{0, "ok"}, {syscall.EACCES, "EACCES"}, {syscall.EDQUOT, "EDQUOT"}, {syscall.Errno(4095), "errno"}} {
		if got := resultLabel(c.e); got != c.want {
			t.Errorf("resultLabel(%d) = %q, want %q", c.e, got, c.want)
		}
	}
	if got := zoneLabel(shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "team"}); got != "group" {
		t.Errorf("zone label %q: principals must not become label values", got)
	}
	if got := zoneLabel(shedfs.Zone{}); got != "none" {
		t.Errorf("zone label of no zone %q", got)
	}
}
