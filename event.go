package shedfs

import (
	"syscall"
	"time"
)

// Event is one fact for the audit trail and the metrics: a change that
// happened, or a denial with the rule that denied it. Every door into the
// store (views, the admin API, the link server) records the same type.
type Event struct {
	Time time.Time
	// User is the principal that acted, NoUser for what no user did.
	User   string
	Zone   Zone
	Path   string // in the view, at the time of the event
	Op     string
	Errno  syscall.Errno // 0 for a change that happened
	Reason string        // the acl reason of a denial
	Bytes  int64         // bytes written, for write events
	// Link and Client are, for share-by-link requests, the link's ID
	// and the address of the HTTP client.
	Link   string
	Client string
	// SHA256 and Scan are the digest and scan state (ScanLabel) of the
	// content, in a write-close and in a refusal by scan state.
	SHA256 string
	Scan   string
	// Session is the session whose view acted, "" for a main view.
	Session string
	// Door is the way the change or refusal came in ("fuse" for a
	// view, "admin" for the admin API and the command line, "link" for
	// the link server, "mcp"... for the agent doors), "" for what no door
	// caused (the daemon's own: trash eviction and expiry).
	Door string
	// Token and TokenReason are, for a request of an agent door, the id
	// of its bearer token and why the token was made.
	Token       string
	TokenReason string
}

// NoUser is the User of an event no user caused: the daemon's own (trash
// expiry, an audit overflow report) and anonymous link downloads. No user
// name can be "-" (ValidPrincipalName).
const NoUser = "-"

// Recorder receives events. It must not block: the callback path calls it
// inline.
type Recorder interface {
	Record(Event)
}
