package quota

import (
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// TestNestedSession: a session's pending bytes count for its user too,
// and a charge to the session is admitted only where both limits have
// room, whichever is reached first.
func TestNestedSession(t *testing.T) {
	led := newLedger()
	user := shedfs.UserHolder("alice")
	s1 := shedfs.SessionHolder("alice", "s1")
	led.limits[user] = shedfs.Limit{Bytes: 10 * mib}
	led.limits[s1] = shedfs.Limit{Bytes: 2 * mib}
	a := New(led)

	admit := func(h shedfs.Holder, n int64) bool {
		unlock := a.Lock(h)
		defer unlock()
		u, l, err := a.Quota(h)
		if err != nil {
			t.Fatal(err)
		}
		d := acl.AdmitBytes(u, l, n)
		if d.Allowed() {
			a.Add(h, n)
		}
		return d.Allowed()
	}
	if !admit(s1, 2*mib) {
		t.Fatal("2 MiB into a 2 MiB session refused")
	}
	if admit(s1, 1) {
		t.Fatal("the session's limit did not stop it")
	}
	if u, _ := a.Usage(user); u.Bytes != 2*mib {
		t.Errorf("user's usage with the session's pending bytes: %d", u.Bytes)
	}
	if !admit(user, 8*mib) {
		t.Fatal("the user's own room refused")
	}
	led.limits[s1] = shedfs.Limit{Bytes: 100 * mib}
	if admit(s1, 1) {
		t.Fatal("the user's limit did not stop the session")
	}
	if _, l, _ := a.Quota(s1); l.Bytes != 10*mib {
		t.Errorf("the tighter limit shown is %d", l.Bytes)
	}
	a.Add(s1, -2*mib)
	if u, _ := a.Usage(user); u.Bytes != 8*mib {
		t.Errorf("user's usage after the session gave back: %d", u.Bytes)
	}
}
