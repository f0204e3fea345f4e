package daemon

import (
	"fmt"
	"os"
	"slices"
	"syscall"

	"github.com/shedfs/shedfs"
)

// SnapshotProblem is one thing fsck found wrong with the snapshots.
type SnapshotProblem struct {
	Detail   string
	Repaired bool
}

// CheckSnapshots checks the snapshots against their links (fsck): links
// or entries no header names (a create or delete cut short), and copy-ups
// a crash cut short, are removed by a repair; a file entry whose link is
// missing is reported; and each
// holder's figure of bytes only snapshots hold is recounted from the
// links and, by a repair, set.
func CheckSnapshots(st *Store, repair bool) ([]SnapshotProblem, error) {
	all, err := st.Meta.ListSnapshots("")
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []SnapshotProblem
	known := map[string]bool{}
	holders := map[shedfs.Holder]bool{}
	for _, sn := range all {
		known[sn.ID] = true
		holders[sn.Holder] = true
		es, err := st.Meta.SnapshotEntries(sn.ID)
		if err != nil {
			return nil, fmt.Errorf("read snapshot %s: %w", sn.Name, err)
		}
		for _, e := range es {
			if e.Mode&syscall.S_IFMT != syscall.S_IFREG || e.Size == 0 {
				continue
			}
			if _, err := os.Stat(st.Blobs.SnapPath(sn.ID, e.Ino)); err != nil {
				out = append(out, SnapshotProblem{Detail: fmt.Sprintf("snapshot %s of %s: %s has no content link", sn.Name, sn.User, e.Path)})
			}
		}
	}
	ids, err := st.Blobs.SnapIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if known[id] {
			continue
		}
		p := SnapshotProblem{Detail: fmt.Sprintf("snapshot links %s of no snapshot (a create or delete cut short)", id)}
		if repair {
			if err := st.Meta.DeleteSnapshot("", "", id); err != nil {
				return nil, err
			}
			if err := st.Blobs.RemoveSnap(id); err != nil {
				return nil, err
			}
			p.Repaired = true
		}
		out = append(out, p)
	}
	// Copies of shared blobs that a crash kept from taking their place.
	left, err := st.Blobs.CopyLeftovers()
	if err != nil {
		return nil, err
	}
	for _, f := range left {
		p := SnapshotProblem{Detail: fmt.Sprintf("copy-up leftover %s (a copy of a shared blob cut short)", f)}
		if repair {
			if err := os.Remove(f); err != nil {
				return nil, fmt.Errorf("remove copy-up leftover: %w", err)
			}
			p.Repaired = true
		}
		out = append(out, p)
	}
	// Holders charged for snapshots that no longer have any count too.
	for _, u := range mustUsers(st) {
		holders[shedfs.UserHolder(u)] = true
	}
	hs := make([]shedfs.Holder, 0, len(holders))
	for h := range holders {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		if h == "" {
			continue
		}
		want, err := snapshotHeldOf(st, h)
		if err != nil {
			return nil, err
		}
		got, err := st.Meta.SnapshotHeld(h)
		if err != nil {
			return nil, err
		}
		if got == want {
			continue
		}
		p := SnapshotProblem{Detail: fmt.Sprintf("%s is charged %d bytes for what only its snapshots hold, they hold %d", h, got, want)}
		if repair {
			if err := st.Meta.AddSnapshotHeld(h, want, true); err != nil {
				return nil, err
			}
			p.Repaired = true
		}
		out = append(out, p)
	}
	return out, nil
}

// mustUsers lists the user names, none on error (the check of the rest
// goes on).
func mustUsers(st *Store) []string {
	us, err := st.Meta.ListUsers()
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(us))
	for _, u := range us {
		names = append(names, u.Name)
	}
	return names
}
