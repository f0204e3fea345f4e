package fusefs

import (
	"slices"
	"testing"
)

// TestKnownInodesStale: a view is claimed for an invalidation once, until
// a request of its own makes the inode fresh again; an attribute
// invalidation does not stand in for one of the data.
func TestKnownInodesStale(t *testing.T) {
	k := newKnownInodes()
	a, b := &View{user: "alice"}, &View{user: "bob"}
	k.learn(a, 7)
	k.learn(b, 7)
	claim := func(data bool, except *View) []*View { return k.claim(7, data, except, nil) }

	if got := claim(false, a); !slices.Equal(got, []*View{b}) {
		t.Fatalf("first attribute claim but alice: %v, want [bob]", got)
	}
	if got := claim(false, a); len(got) != 0 {
		t.Fatalf("second attribute claim: %v, want none (bob's attributes are already invalidated)", got)
	}
	if got := claim(true, a); !slices.Equal(got, []*View{b}) {
		t.Fatalf("data claim after an attribute one: %v, want [bob]", got)
	}
	if got := claim(true, a); len(got) != 0 {
		t.Fatalf("second data claim: %v, want none", got)
	}
	if got := claim(false, a); len(got) != 0 {
		t.Fatalf("attribute claim after a data one: %v, want none", got)
	}
	k.touch(b, 7)
	if got := claim(true, a); !slices.Equal(got, []*View{b}) {
		t.Fatalf("data claim after bob asked again: %v, want [bob]", got)
	}
	// A new entry is fresh; a stale count survives a partial forget.
	k.learn(b, 7)
	if got := claim(false, a); !slices.Equal(got, []*View{b}) {
		t.Fatalf("claim after a new entry: %v, want [bob]", got)
	}
	k.forget(b, 7, 1)
	if !k.knows(b, 7) {
		t.Fatal("bob forgot 1 of 2 entries and no longer holds 7")
	}
	// touch of an inode a view does not hold adds nothing.
	k.touch(b, 9)
	if k.knows(b, 9) {
		t.Fatal("touch made bob hold 9")
	}
}

// TestMergeInval: invalidations queued about one inode merge into one
// covering both.
func TestMergeInval(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b inval
		want inval
	}{
		{"attr and attr", attrOf(5), attrOf(5), attrOf(5)},
		{"attr then data", attrOf(5), dataOf(5, 10, 5), dataOf(5, 10, 5)},
		{"data then attr", dataOf(5, 10, 5), attrOf(5), dataOf(5, 10, 5)},
		{"two ranges", dataOf(5, 10, 5), dataOf(5, 0, 2), dataOf(5, 0, 15)},
		{"a range and to the end", dataOf(5, 10, 5), dataOf(5, 20, 0), dataOf(5, 10, 0)},
		{"a directory", dirOf(5), dataOf(5, 3, 1), dirOf(5)},
		{"a name", nameIn(5, "x"), nameIn(5, "x"), nameIn(5, "x")},
	} {
		if got := merge(c.a, c.b); got != c.want {
			t.Errorf("%s: merge(%+v, %+v) = %+v, want %+v", c.name, c.a, c.b, got, c.want)
		}
	}
}
