package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionUnstamped: a binary nobody stamped says dev and unknown,
// never an empty field.
func TestVersionUnstamped(t *testing.T) {
	out := ok(t, "version")
	want := "shedfs dev\ncommit: unknown\nbuilt: unknown\n"
	if out != want {
		t.Errorf("shedfs version = %q, want %q", out, want)
	}
}

// TestVersionStamped: what make build stamps with -ldflags is what
// shedfs version prints.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "shedfs")
	ld := "-X main.version=1.2.3 -X main.commit=abc123 -X main.buildDate=2026-01-02T03:04:05Z"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "shedfs 1.2.3\ncommit: abc123\nbuilt: 2026-01-02T03:04:05Z\n"
	if string(out) != want {
		t.Errorf("shedfs version = %q, want %q", out, want)
	}
	if out, _ := exec.Command(bin, "--version").Output(); !strings.HasPrefix(string(out), "shedfs version 1.2.3") {
		t.Errorf("shedfs --version = %q", out)
	}
}
