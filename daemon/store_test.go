package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shedfs/shedfs/metadata"
)

// TestOpenCreatesOnlyWhenAsked: only OpenOptions.Create makes a store
// (shedfs init, serve/mount --init); any other open of a directory that
// holds none, missing or empty, is ErrNoStore and leaves it as it was, so
// that a typo in --store never becomes a new, empty store (issue 27).
func TestOpenCreatesOnlyWhenAsked(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	if _, err := OpenStore(missing, OpenOptions{}); !errors.Is(err, metadata.ErrNoStore) {
		t.Errorf("open of a missing directory: %v, want ErrNoStore", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("open of a missing directory made it: %v", err)
	}
	empty := t.TempDir()
	for _, ro := range []bool{false, true} {
		if _, err := OpenStore(empty, OpenOptions{ReadOnly: ro}); !errors.Is(err, metadata.ErrNoStore) {
			t.Errorf("open (read-only %v) of an empty directory: %v, want ErrNoStore", ro, err)
		}
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("open of an empty directory left %d entries in it (%s ...)", len(ents), ents[0].Name())
	}

	dir := filepath.Join(t.TempDir(), "store")
	st, err := OpenStore(dir, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Created {
		t.Errorf("the first open with Create: Created is false")
	}
	st.Close()
	st, err = OpenStore(dir, OpenOptions{})
	if err != nil {
		t.Fatalf("open of an existing store: %v", err)
	}
	if st.Created {
		t.Errorf("a second open: Created is true")
	}
	st.Close()
	st, err = OpenStore(dir, OpenOptions{Create: true})
	if err != nil || st.Created {
		t.Errorf("open with Create of an existing store: created %v, %v", st != nil && st.Created, err)
	}
	if st != nil {
		st.Close()
	}
}
