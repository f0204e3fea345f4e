package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shedfs.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigUnknownKey: a key that names no flag, a value of the wrong
// type and a file TOML cannot read are each one line naming the key (or
// the line), before anything is opened.
func TestConfigUnknownKey(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"mount-root = \"/x\"\nmount-rot = \"/y\"\n", `unknown key "mount-rot"`},
		{"[serve]\nmount-root = \"/x\"\n", `unknown key "serve"`},
		{"mount-root = \"/x\"\nuid = \"1000\"\n", `key "uid": want an integer, not a string`},
		{"mount-root = \"/x\"\nno-audit = 1\n", `key "no-audit": want true or false`},
		{"mount-root = \"/x\"\naudit-retention-interval = \"soon\"\n", `key "audit-retention-interval"`},
		{"mount-root = \n", "line 1"},
		{"mount-root = \"/x\"\nconfig = \"/etc/other.toml\"\n", `unknown key "config"`},
	} {
		p := writeConfig(t, tc.text)
		fails(t, tc.want, "serve", "--config", p, "--print-config")
	}
	fails(t, "no such file", "serve", "--config", filepath.Join(t.TempDir(), "none.toml"), "--print-config")
}

// TestConfigPrecedence: what the file sets applies (a required flag
// included), the command line wins over it, and the defaults fill the
// rest.
func TestConfigPrecedence(t *testing.T) {
	p := writeConfig(t, `
mount-root = "/run/shedfs"
metrics = "127.0.0.1:9567"
metrics-max-holders = 7
log-format = "json"
no-audit = true
audit-retention-interval = "5m"
memory-limit = 0
`)
	out := ok(t, "serve", "--config", p, "--print-config")
	for _, want := range []string{
		`mount-root = "/run/shedfs"`, `metrics = "127.0.0.1:9567"`, "metrics-max-holders = 7",
		`log-format = "json"`, "no-audit = true", `audit-retention-interval = "5m0s"`,
		`memory-limit = "0"`, `symlinks = "shared-in-zone"`, "# store = \"\"",
	} {
		if !strings.Contains(out, "\n"+want+"\n") {
			t.Errorf("print-config lacks %q:\n%s", want, out)
		}
	}
	out = ok(t, "--log-format", "text", "serve", "--config", p, "--mount-root", "/mnt/views", "--metrics-max-holders", "9", "--print-config", "--no-audit=false")
	for _, want := range []string{`mount-root = "/mnt/views"`, "metrics-max-holders = 9", `log-format = "text"`, "no-audit = false", `metrics = "127.0.0.1:9567"`} {
		if !strings.Contains(out, "\n"+want+"\n") {
			t.Errorf("with flags, print-config lacks %q:\n%s", want, out)
		}
	}
	// Without the file, the required flag is missing again.
	fails(t, "required flag --mount-root not set", "serve", "--print-config")
}

// TestConfigPrintRoundTrip: what --print-config prints, read back as the
// config file, configures exactly the same.
func TestConfigPrintRoundTrip(t *testing.T) {
	first := ok(t, "serve", "--mount-root", "/run/shedfs", "--store", "/var/lib/shedfs", "--uid", "1000", "--gid", "1000",
		"--scan-zones", "share,output", "--audit-max-age", "7d", "--scan-wait", "3s", "--log-format", "json", "--print-config")
	p := writeConfig(t, first)
	second := ok(t, "serve", "--config", p, "--print-config")
	if first != second {
		t.Errorf("print-config does not round-trip:\nfirst:\n%s\nsecond:\n%s", first, second)
	}
	for _, want := range []string{`store = "/var/lib/shedfs"`, "uid = 1000", `scan-zones = "share,output"`, `scan-wait = "3s"`} {
		if !strings.Contains(second, "\n"+want+"\n") {
			t.Errorf("print-config lacks %q:\n%s", want, second)
		}
	}
}
