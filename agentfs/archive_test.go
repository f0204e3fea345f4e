package agentfs

import (
	"archive/zip"
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

type zentry struct {
	name, body string
	symlink    bool
	size       int // a body of this many zeros, when set
}

func makeZip(t *testing.T, entries []zentry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.symlink {
			h.SetMode(0o777 | 1<<27) // os.ModeSymlink
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if e.size > 0 {
			w.Write(make([]byte, e.size))
		} else {
			w.Write([]byte(e.body))
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestArchives packs, lists and unpacks through the core, and refuses
// archives that climb out, hold symlinks, or are bombs, before writing
// anything.
func TestArchives(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	f := fx.fs(t, "alice", nil)
	put(t, f, map[string]string{"docs/a.md": "# A\n", "docs/sub/b.txt": strings.Repeat("b", 5000), "top.txt": "top\n"})
	z, err := f.Zip(ctx, []string{"docs", "top.txt"}, "output/pack.zip", DefaultArchiveLimits)
	if err != nil || z.Entries != 5 || z.Bytes != 5008 {
		t.Fatalf("zip: %+v %v", z, err)
	}
	wantCode(t, "zip onto an existing archive", func() error {
		_, err := f.Zip(ctx, []string{"docs"}, "output/pack.zip", DefaultArchiveLimits)
		return err
	}(), CodeExists)
	wantCode(t, "zip into uploads", func() error {
		_, err := f.Zip(ctx, []string{"docs"}, "uploads/p.zip", DefaultArchiveLimits)
		return err
	}(), CodePermissionDenied)
	info, err := f.ZipInfo(ctx, "output/pack.zip", 2)
	if err != nil || info.Count != 5 || len(info.Entries) != 2 || !info.Truncated || info.Bytes != 5008 || info.Entries[0].Name != "docs/" {
		t.Fatalf("zipinfo: %+v %v", info, err)
	}
	u, err := f.Unzip(ctx, "output/pack.zip", "output/unpacked", DefaultArchiveLimits)
	if err != nil || u.Files != 3 {
		t.Fatalf("unzip: %+v %v", u, err)
	}
	if b, _, err := f.ReadAll(ctx, "output/unpacked/docs/sub/b.txt", 1<<20); err != nil || len(b) != 5000 {
		t.Fatalf("unpacked: %d %v", len(b), err)
	}
	wantCode(t, "unzip over existing files", func() error {
		_, err := f.Unzip(ctx, "output/pack.zip", "output/unpacked", DefaultArchiveLimits)
		return err
	}(), CodeExists)

	bad := []struct {
		name    string
		entries []zentry
		lim     ArchiveLimits
		code    Code
		rule    string
	}{
		{"dot dot", []zentry{{name: "ok.txt", body: "ok"}, {name: "../../evil.txt", body: "x"}}, DefaultArchiveLimits, CodePathEscape, acl.ReasonArchiveEscape},
		{"dot dot inside", []zentry{{name: "a/../../evil.txt", body: "x"}}, DefaultArchiveLimits, CodePathEscape, acl.ReasonArchiveEscape},
		{"absolute", []zentry{{name: "/etc/evil", body: "x"}}, DefaultArchiveLimits, CodePathEscape, acl.ReasonArchiveEscape},
		{"symlink", []zentry{{name: "ok.txt", body: "ok"}, {name: "link", body: "/etc/passwd", symlink: true}}, DefaultArchiveLimits, CodePathEscape, acl.ReasonArchiveEscape},
		{"ratio bomb", []zentry{{name: "ok.txt", body: "ok"}, {name: "zeros", size: 20 << 20}}, DefaultArchiveLimits, CodeFileTooLarge, acl.ReasonArchiveBomb},
		{"total bomb", []zentry{{name: "a", body: strings.Repeat("x", 600)}, {name: "b", body: strings.Repeat("y", 600)}}, ArchiveLimits{MaxBytes: 1000}, CodeFileTooLarge, acl.ReasonArchiveBomb},
		{"entries", []zentry{{name: "a"}, {name: "b"}, {name: "c"}}, ArchiveLimits{MaxEntries: 2}, CodeFileTooLarge, acl.ReasonArchiveBomb},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			zp := "bad-" + strings.ReplaceAll(c.name, " ", "-") + ".zip"
			if _, err := f.Write(ctx, zp, makeZip(t, c.entries), CreateOnly, ""); err != nil {
				t.Fatal(err)
			}
			before := fx.rec.events
			_, err := f.Unzip(ctx, zp, "out-"+zp[:len(zp)-4], c.lim)
			if e := wantCode(t, c.name, err, c.code); e.Rule != c.rule {
				t.Errorf("rule %q, want %q", e.Rule, c.rule)
			}
			wantCode(t, "nothing written", func() error { _, err := f.Stat("out-" + zp[:len(zp)-4]); return err }(), CodeNotFound)
			if _, err := f.Stat("evil.txt"); err == nil {
				t.Fatal("an entry climbed out")
			}
			refused := false
			for _, ev := range fx.rec.events[len(before):] {
				if ev.Reason == c.rule {
					refused = true
				}
			}
			if !refused {
				t.Errorf("the refusal was not recorded")
			}
		})
	}
	// Past the holder's quota: refused before anything is written.
	if err := fx.store.SetLimit(shedfs.UserHolder("alice"), shedfs.Limit{Bytes: 12 << 20}); err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 10<<20)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	big := makeZip(t, []zentry{{name: "a.bin", body: string(noise)}})
	if _, err := f.Write(ctx, "big.zip", big, CreateOnly, ""); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "past the quota", func() error { _, err := f.Unzip(ctx, "big.zip", "bigout", DefaultArchiveLimits); return err }(), CodeQuotaExceeded)
	wantCode(t, "nothing written past the quota", func() error { _, err := f.Stat("bigout"); return err }(), CodeNotFound)
	wantCode(t, "not a zip", func() error { _, err := f.ZipInfo(ctx, "top.txt", 10); return err }(), CodeInvalidArgument)
	// A token without archive access.
	tok := fx.fs(t, "alice", &acl.Grant{Access: acl.AccessRead | acl.AccessList | acl.AccessWrite})
	wantCode(t, "a token without archive", func() error {
		_, err := tok.Unzip(ctx, "output/pack.zip", "output/x", DefaultArchiveLimits)
		return err
	}(), CodePermissionDenied)
}
