package textdiff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// apply applies the edit script's new side, which must be b.
func newSide(es []edit) string {
	var sb strings.Builder
	for _, e := range es {
		if e.k != del {
			sb.WriteString(e.line)
		}
	}
	return sb.String()
}

func oldSide(es []edit) string {
	var sb strings.Builder
	for _, e := range es {
		if e.k != add {
			sb.WriteString(e.line)
		}
	}
	return sb.String()
}

// TestScript: the edit script of each pair gives back both texts, and
// is as short as the known shortest.
func TestScript(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		edits int
	}{
		{"", "", 0},
		{"a\n", "", 1},
		{"", "a\nb\n", 2},
		{"a\nb\nc\n", "a\nc\n", 1},
		{"a\nb\nc\na\nb\nb\na\n", "c\nb\na\nb\na\nc\n", 5},
		{"x\ny", "x\ny\n", 2},
	} {
		es := script(Lines(tc.a), Lines(tc.b))
		if oldSide(es) != tc.a || newSide(es) != tc.b {
			t.Errorf("%q -> %q: script gives %q -> %q", tc.a, tc.b, oldSide(es), newSide(es))
		}
		n := 0
		for _, e := range es {
			if e.k != same {
				n++
			}
		}
		if n != tc.edits {
			t.Errorf("%q -> %q: %d edits, want %d", tc.a, tc.b, n, tc.edits)
		}
	}
}

// TestUnifiedAppliesWithPatch: patch(1) turns a into b with the diff,
// for changes near, far apart, at the ends and without a final newline.
func TestUnifiedAppliesWithPatch(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("patch(1) is needed under CI")
		}
		t.Skip("no patch(1)")
	}
	var a, b []string
	for i := 0; i < 60; i++ {
		a = append(a, "line "+string(rune('A'+i%26))+"\n")
	}
	b = append(b, "new first\n")
	b = append(b, a[:10]...)
	b = append(b, "inserted\n")
	b = append(b, a[12:40]...)
	b = append(b, a[41:]...)
	b = append(b, "no newline")
	for _, pair := range [][2]string{
		{strings.Join(a, ""), strings.Join(b, "")},
		{"", "only\nnew\n"},
		{"gone\n", ""},
	} {
		dir := t.TempDir()
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(pair[0]), 0o644)
		d := Unified("a/f", "b/f", pair[0], pair[1])
		cmd := exec.Command("patch", "-s", "-p1", "-E")
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch: %v\n%s\n%s", err, out, d)
		}
		got, _ := os.ReadFile(f)
		if string(got) != pair[1] {
			t.Errorf("patched %q, want %q\n%s", got, pair[1], d)
		}
	}
	if Unified("a", "b", "same\n", "same\n") != "" {
		t.Error("a diff of equal texts")
	}
}
