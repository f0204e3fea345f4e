package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// TestImportCountsPending: with 3 MiB written to a file still open in a
// view (pending in the daemon's accountant, not yet in the store), a
// 2 MiB import into a 4 MiB quota is refused with quota_exceeded and
// leaves nothing behind, and quota show counts the pending bytes.
func TestImportCountsPending(t *testing.T) {
	st := openTestStore(t)
	d, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	serveTestAdmin(t, st, d.Admin())
	c := dialTest(t, st)
	ctx := context.Background()
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "alice", Quota: Amount{Bytes: 4 << 20}}); err != nil {
		t.Fatal(err)
	}
	h := shedfs.UserHolder("alice")
	stored, _ := st.Meta.Usage(h)

	// What an open file in a view does when it grows by 3 MiB: admitted
	// and held pending in the accountant of the views.
	views := d.core.Accountant()
	unlock := views.Lock(h)
	views.Add(h, 3<<20)
	unlock()

	qs, err := c.ShowQuota(ctx, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := qs[0].Used.Bytes; got != stored.Bytes+3<<20 {
		t.Errorf("quota show: %d bytes used, want %d (3 MiB pending in an open file)", got, stored.Bytes+3<<20)
	}
	content := bytes.Repeat([]byte("i"), 2<<20)
	for _, size := range []int64{int64(len(content)), -1} {
		_, err = c.Import(ctx, ImportRequest{User: "alice", Name: "two-mib"}, bytes.NewReader(content), size)
		if codeOf(t, err) != CodeQuota {
			t.Errorf("2 MiB import (size %d) with 3 MiB pending in a 4 MiB quota: %v, want %s", size, err, CodeQuota)
		}
	}
	u, _ := st.Meta.GetUser("alice")
	if entries, _ := st.Meta.ReadDir(u.Roots.Uploads); len(entries) != 0 {
		t.Errorf("refused import left %v", entries)
	}
	if after, _ := st.Meta.Usage(h); after != stored {
		t.Errorf("stored usage %+v after the refusal, want %+v", after, stored)
	}
	if p := views.Pending(h); p != 3<<20 {
		t.Errorf("pending %d after the refusal, want only the open file's 3 MiB", p)
	}
	// The open file is closed: its bytes land. 1 MiB fits, not more.
	unlock = views.Lock(h)
	views.Add(h, -3<<20)
	unlock()
	if _, err := c.Import(ctx, ImportRequest{User: "alice", Name: "two-mib"}, bytes.NewReader(content), int64(len(content))); err != nil {
		t.Errorf("2 MiB import into an empty 4 MiB quota: %v", err)
	}
	checkClean(t, st)
}

// probe is an import body that checks, halfway through, that nothing of
// the import is visible yet.
type probe struct {
	t     *testing.T
	st    *Store
	dir   uint64
	left  int
	fail  bool // end with a read error instead of EOF
	saw   bool
	chunk []byte
}

func (p *probe) Read(b []byte) (int, error) {
	if p.left == 0 {
		if p.fail {
			return 0, errors.New("client went away")
		}
		return 0, io.EOF
	}
	if !p.saw {
		p.saw = true
		if entries, _ := p.st.Meta.ReadDir(p.dir); len(entries) != 0 {
			p.t.Errorf("while the import streams, uploads/ lists %v", entries)
		}
	}
	n := copy(b, p.chunk[:min(len(p.chunk), p.left)])
	p.left -= n
	return n, nil
}

// TestImportInvisibleUntilComplete: an import's name appears only once
// its content is whole; a transfer that breaks off leaves no name, no
// inode and no blob.
func TestImportInvisibleUntilComplete(t *testing.T) {
	bothAdmins(t, func(t *testing.T, st *Store, a Admin) {
		ctx := context.Background()
		if _, err := a.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
			t.Fatal(err)
		}
		u, _ := st.Meta.GetUser("alice")
		before, _ := st.Meta.Usage(shedfs.UserHolder("alice"))
		chunk := bytes.Repeat([]byte("p"), 64<<10)
		body := &probe{t: t, st: st, dir: u.Roots.Uploads, left: 3 << 20, fail: true, chunk: chunk}
		if _, err := a.Import(ctx, ImportRequest{User: "alice", Name: "broken"}, body, -1); err == nil {
			t.Fatal("an import whose body broke off succeeded")
		}
		if entries, _ := st.Meta.ReadDir(u.Roots.Uploads); len(entries) != 0 {
			t.Errorf("a broken import left %v", entries)
		}
		// Through the socket, the daemon notices the broken transfer
		// after the client has given up.
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if orphans, _ := st.Meta.Orphans(); len(orphans) == 0 {
				break
			}
		}
		if orphans, _ := st.Meta.Orphans(); len(orphans) != 0 {
			t.Errorf("a broken import left orphans %v", orphans)
		}
		if after, _ := st.Meta.Usage(shedfs.UserHolder("alice")); after != before {
			t.Errorf("usage %+v after a broken import, want %+v", after, before)
		}
		body = &probe{t: t, st: st, dir: u.Roots.Uploads, left: 3 << 20, chunk: chunk}
		res, err := a.Import(ctx, ImportRequest{User: "alice", Name: "whole"}, body, 3<<20)
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.Meta.Lookup(u.Roots.Uploads, "whole")
		if err != nil || n.Size != 3<<20 || n.Ino != res.Ino {
			t.Fatalf("imported file %+v, %v", n, err)
		}
		if got := blobContent(t, st, n.Ino); got != strings.Repeat("p", 3<<20) {
			t.Errorf("content differs")
		}
		if _, err := st.Meta.Lookup(u.Roots.Uploads, "broken"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("broken: %v", err)
		}
		want := before
		want.Bytes += shedfs.Charge(3 << 20)
		want.Inodes++
		if after, _ := st.Meta.Usage(shedfs.UserHolder("alice")); after != want {
			t.Errorf("usage %+v, want %+v", after, want)
		}
		checkClean(t, st)
	})
}

// TestImportEvictsTrash: an import into a quota that only the trash
// fills evicts the trash and succeeds, as a view's create does (the trash
// never causes EDQUOT): for the inode it needs, and for its bytes.
func TestImportEvictsTrash(t *testing.T) {
	for _, short := range []string{"inodes", "bytes"} {
		t.Run(short, func(t *testing.T) {
			bothAdmins(t, func(t *testing.T, st *Store, a Admin) {
				ctx := context.Background()
				if _, err := a.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
					t.Fatal(err)
				}
				u, _ := st.Meta.GetUser("alice")
				h := shedfs.UserHolder("alice")
				if _, err := importString(ctx, a, ImportRequest{User: "alice", Name: "old"}, strings.Repeat("o", 300<<10)); err != nil {
					t.Fatal(err)
				}
				note := &metadata.TrashNote{By: "alice", Why: metadata.TrashUnlink, Path: "/uploads/old"}
				if _, _, kept, err := st.Meta.UnlinkTrash(u.Roots.Uploads, "old", false, nil, note); err != nil || !kept {
					t.Fatalf("delete old into the trash: %v kept=%v", err, kept)
				}
				used, _ := st.Meta.Usage(h)
				// The kept file takes the last inode, or all but 100
				// KiB of the bytes.
				lim := shedfs.Limit{Inodes: used.Inodes}
				if short == "bytes" {
					lim = shedfs.Limit{Bytes: used.Bytes + 100<<10}
				}
				if err := st.Meta.SetLimit(h, lim); err != nil {
					t.Fatal(err)
				}
				res, err := importString(ctx, a, ImportRequest{User: "alice", Name: "new"}, strings.Repeat("n", 200<<10))
				if err != nil {
					t.Fatalf("import into a quota the trash fills (%s): %v, want the trash evicted", short, err)
				}
				if blobContent(t, st, res.Ino) != strings.Repeat("n", 200<<10) {
					t.Error("imported content differs")
				}
				if list, _ := st.Meta.ListTrash([]shedfs.Holder{h}); len(list) != 0 {
					t.Errorf("trash still holds %d files", len(list))
				}
				// Nothing left to evict: refused for the quota, nothing
				// left behind.
				if _, err := importString(ctx, a, ImportRequest{User: "alice", Name: "more"}, strings.Repeat("m", 300<<10)); codeOf(t, err) != CodeQuota {
					t.Errorf("import past the quota with an empty trash: %v, want %s", err, CodeQuota)
				}
				checkClean(t, st)
			})
		})
	}
}
