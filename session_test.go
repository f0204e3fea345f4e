package shedfs

import "testing"

func TestSessionHolders(t *testing.T) {
	z := SessionZone("alice", "s1")
	if got := z.String(); got != "session:alice/s1" {
		t.Errorf("zone %q", got)
	}
	if back, err := ParseZone(z.String()); err != nil || back != z {
		t.Errorf("ParseZone: %v %v", back, err)
	}
	if got := z.Label(); got != "session" {
		t.Errorf("label %q names the session", got)
	}
	h := SessionHolder("alice", "s1")
	if h != "session:alice/s1" || HolderOf(z) != h {
		t.Errorf("holder %q", h)
	}
	for _, c := range []struct {
		h     Holder
		outer Holder
		ok    bool
	}{
		{h, "user:alice", true},
		{"user:alice", "", false},
		{"group:g", "", false},
		{ShareHolder, "", false},
	} {
		if o, ok := OuterHolder(c.h); o != c.outer || ok != c.ok {
			t.Errorf("OuterHolder(%s) = %q %v", c.h, o, ok)
		}
	}
}

func TestTighter(t *testing.T) {
	for _, c := range []struct {
		name  string
		u     Usage
		l     Limit
		ou    Usage
		ol    Limit
		wantU Usage
		wantL Limit
	}{
		{"no limits", Usage{10, 1}, Limit{}, Usage{50, 5}, Limit{}, Usage{10, 1}, Limit{}},
		{"session only", Usage{10, 1}, Limit{100, 10}, Usage{50, 5}, Limit{}, Usage{10, 1}, Limit{100, 10}},
		{"user only", Usage{10, 1}, Limit{}, Usage{50, 5}, Limit{1000, 9}, Usage{50, 5}, Limit{1000, 9}},
		{"session tighter", Usage{10, 1}, Limit{100, 3}, Usage{50, 5}, Limit{1000, 100}, Usage{10, 1}, Limit{100, 3}},
		{"user tighter", Usage{10, 1}, Limit{1000, 100}, Usage{950, 95}, Limit{1000, 100}, Usage{950, 95}, Limit{1000, 100}},
		{"mixed", Usage{10, 1}, Limit{100, 100}, Usage{50, 99}, Limit{1000, 100}, Usage{10, 99}, Limit{100, 100}},
		{"user over", Usage{0, 0}, Limit{100, 0}, Usage{200, 0}, Limit{100, 0}, Usage{200, 0}, Limit{100, 0}},
	} {
		u, l := Tighter(c.u, c.l, c.ou, c.ol)
		if u != c.wantU || l != c.wantL {
			t.Errorf("%s: got %v %v, want %v %v", c.name, u, l, c.wantU, c.wantL)
		}
	}
}
