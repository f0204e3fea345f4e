package fusefs

import (
	"slices"
	"testing"
	"time"
)

func TestNegativeEntries(t *testing.T) {
	now := time.Unix(1000, 0)
	a, b := &View{user: "a"}, &View{user: "b"}
	n := newNegativeEntries(time.Hour)

	if !n.expect(a, 7, "x", now) || !n.expect(b, 7, "x", now) || !n.expect(a, 7, "y", now) {
		t.Fatal("expect refused in an empty table")
	}
	// A lookup that found the name takes its entry back.
	n.found(a, 7, "y")
	if got := n.take(7, "y", nil, nil); len(got) != 0 {
		t.Errorf("take y after found: %v", got)
	}
	// take names the views but the one that made the change, once.
	if got := n.take(7, "x", a, nil); !slices.Equal(got, []*View{b}) {
		t.Errorf("take x except a: %v, want [b]", got)
	}
	if got := n.take(7, "x", nil, nil); len(got) != 0 {
		t.Errorf("take x again: %v, want none", got)
	}
	// A directory the kernel dropped, and a view unmounted.
	n.expect(a, 8, "x", now)
	n.expect(b, 8, "x", now)
	n.dropDir(a, 8)
	if got := n.take(8, "x", nil, nil); !slices.Equal(got, []*View{b}) {
		t.Errorf("take after dropDir(a): %v, want [b]", got)
	}
	n.expect(a, 9, "x", now)
	n.dropView(a)
	if got := n.take(9, "x", nil, nil); len(got) != 0 {
		t.Errorf("take after dropView(a): %v, want none", got)
	}

	// Full: a shard refuses new names until their timeout passed.
	per := maxNegatives / knownShards
	for i := range per {
		if !n.expect(a, knownShards, string(rune('a'+i%26))+string(rune(i)), now) {
			t.Fatalf("refused entry %d of %d", i, per)
		}
	}
	if n.expect(a, knownShards, "one more", now) {
		t.Error("a full shard took one more name")
	}
	if !n.expect(a, 2*knownShards, "later", now.Add(2*time.Hour)) {
		t.Error("a full shard of expired entries refused a name")
	}
	if n.shards[0].n != 1 {
		t.Errorf("after the prune the shard holds %d names, want 1", n.shards[0].n)
	}
}
