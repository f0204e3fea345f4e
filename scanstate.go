package shedfs

import (
	"fmt"
	"strings"
)

// ScanState is where a file stands with the malware scanner. It is shown
// as user.shedfs.scan and decides who may open the file.
type ScanState uint8

// The scan states (README, "Content").
const (
	// ScanUnscanned: no scanner is configured, the zone is not scanned,
	// the file is over the size limit, or it predates scanning.
	ScanUnscanned ScanState = iota
	// ScanPending: the content changed and awaits its verdict.
	ScanPending
	// ScanClean: the scanner found nothing (or an admin released it).
	ScanClean
	// ScanInfected: the scanner matched a signature; the file is
	// quarantined.
	ScanInfected
	// ScanError: the scanner could not give a verdict.
	ScanError
)

var scanStateNames = [...]string{"unscanned", "pending", "clean", "infected", "error"}

// String is the state's name.
func (s ScanState) String() string {
	if int(s) < len(scanStateNames) {
		return scanStateNames[s]
	}
	return fmt.Sprintf("scan(%d)", uint8(s))
}

// Content is what the store knows of a file's content beyond its bytes:
// its digest and its scan verdict.
type Content struct {
	// SHA256 is the lowercase hex digest of the content, "" until
	// computed for the current content.
	SHA256 string
	State  ScanState
	// Detail is the signature of an infected file or why a scan failed.
	Detail string
	// Writer is the user whose view last changed a pending file.
	Writer string
}

// ScanLabel is the state as user.shedfs.scan shows it: "clean",
// "infected:<signature>", "error:<why>". It is the one place of that
// format.
func (c Content) ScanLabel() string {
	if (c.State == ScanInfected || c.State == ScanError) && c.Detail != "" {
		return c.State.String() + ":" + c.Detail
	}
	return c.State.String()
}

// ParseScanLabel reads what ScanLabel writes.
func ParseScanLabel(s string) (Content, error) {
	name, detail, _ := strings.Cut(s, ":")
	for i, n := range scanStateNames {
		if n == name {
			return Content{State: ScanState(i), Detail: detail}, nil
		}
	}
	return Content{}, fmt.Errorf("unknown scan state %q", s)
}
