package scan_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/shedfs/shedfs/scan"
	"github.com/shedfs/shedfs/scan/clamdtest"
)

// clamd is the one scanner the tests of this package share.
var clamd *clamdtest.Clamd

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scan-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clamd, err = clamdtest.Start(dir)
	if err != nil {
		os.RemoveAll(dir)
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "FAIL: no clamd on CI:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "SKIP: no clamd:", err)
		os.Exit(0)
	}
	code := m.Run()
	clamd.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func client(t *testing.T) *scan.Client {
	t.Helper()
	a, err := scan.ParseAddr(clamd.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return scan.New(a)
}

func TestScanVerdicts(t *testing.T) {
	big := strings.Repeat("x", 300<<10) + clamdtest.BodyMarker + strings.Repeat("y", 100)
	for _, tc := range []struct {
		name, content, sig string
	}{
		{"clean", "hello, world\n", ""},
		{"empty", "", ""},
		{"eicar", clamdtest.EICAR, clamdtest.EICARSignature},
		{"body marker across chunks", big, clamdtest.BodySignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := client(t).Scan(context.Background(), strings.NewReader(tc.content))
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			if v.Infected != (tc.sig != "") || v.Signature != tc.sig {
				t.Fatalf("verdict %+v, want signature %q", v, tc.sig)
			}
		})
	}
}

func TestPing(t *testing.T) {
	if err := client(t).Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachable(t *testing.T) {
	c := scan.New(scan.Addr{Network: "unix", Address: t.TempDir() + "/none.sock"})
	if _, err := c.Scan(context.Background(), strings.NewReader("x")); err == nil || errors.Is(err, scan.ErrRefused) {
		t.Fatalf("scan with no clamd: %v, want a connection error", err)
	}
}

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in, network, address string
		ok                   bool
	}{
		{"unix:/run/clamav/clamd.ctl", "unix", "/run/clamav/clamd.ctl", true},
		{"tcp:127.0.0.1:3310", "tcp", "127.0.0.1:3310", true},
		{"udp:1.2.3.4:5", "", "", false},
		{"/run/clamd.ctl", "", "", false},
		{"unix:", "", "", false},
	} {
		a, err := scan.ParseAddr(tc.in)
		if (err == nil) != tc.ok || a.Network != tc.network || a.Address != tc.address {
			t.Errorf("ParseAddr(%q) = %+v, %v", tc.in, a, err)
		}
	}
}
