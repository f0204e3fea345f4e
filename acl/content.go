package acl

import (
	"syscall"

	"github.com/shedfs/shedfs"
)

// The in-band content attributes (README, "Content"): computed, read-only.
const (
	XattrSHA256 = XattrPrefix + "sha256"
	XattrScan   = XattrPrefix + "scan"
)

const (
	// ReasonScanPending: opening, from another view than the writer's, a
	// file whose scan verdict has not come within the wait (EAGAIN).
	ReasonScanPending = "scan_pending"
	// ReasonInfected: opening a file the scanner found infected; it is
	// quarantined for every view and link (EACCES).
	ReasonInfected = "infected"
)

// OpenContent decides whether user may open a file whose content stands
// as c. An infected file opens for nobody. A pending file opens in the
// view that wrote it; others get scan_pending, which the caller may wait
// out and ask again. A scan error opens only when the daemon fails open
// (--scan-fail-open); otherwise it is treated as pending.
func OpenContent(user string, c shedfs.Content, failOpen bool) Decision {
	switch c.State {
	case shedfs.ScanInfected:
		return deny(syscall.EACCES, ReasonInfected)
	case shedfs.ScanPending:
		if c.Writer != "" && c.Writer == user {
			return Decision{}
		}
		return deny(syscall.EAGAIN, ReasonScanPending)
	case shedfs.ScanError:
		if failOpen {
			return Decision{}
		}
		return deny(syscall.EAGAIN, ReasonScanPending)
	}
	return Decision{}
}
