package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// This file holds the vocabulary of the admin API: the operations, their
// request and response types, and the error type. Both the HTTP server and
// its client use these types, and so does the direct path the CLI takes
// when no daemon runs, so the two ways cannot drift apart.

// Admin is every administrative operation on a store. Local performs them
// on an open store, Client asks a running daemon to perform them; the CLI
// is written against this interface so it does not care which one it has.
// Every error returned is an *Error.
type Admin interface {
	AddUser(ctx context.Context, req UserAddRequest) (*UserInfo, error)
	ListUsers(ctx context.Context) ([]UserInfo, error)
	ShowUser(ctx context.Context, name string) (*UserInfo, error)
	RemoveUser(ctx context.Context, name string, force bool) (*RemoveResult, error)

	AddGroup(ctx context.Context, req GroupAddRequest) (*GroupInfo, error)
	ListGroups(ctx context.Context) ([]GroupInfo, error)
	ShowGroup(ctx context.Context, name string) (*GroupInfo, error)
	RemoveGroup(ctx context.Context, name string, force bool) (*RemoveResult, error)
	AddMember(ctx context.Context, group string, req MemberRequest) (*GroupInfo, error)
	RemoveMember(ctx context.Context, group, user string) (*GroupInfo, error)

	SetQuota(ctx context.Context, holder string, req QuotaSetRequest) (*QuotaInfo, error)
	// ShowQuota returns the quota of one holder, or of every holder when
	// holder is empty.
	ShowQuota(ctx context.Context, holder string) ([]QuotaInfo, error)
	// GetSettings and SetSettings read and change the store's default
	// quotas and max file size (settings.go).
	GetSettings(ctx context.Context) (*Settings, error)
	SetSettings(ctx context.Context, req SettingsSetRequest) (*Settings, error)

	Status(ctx context.Context) (*Status, error)

	// Import copies the content read from body into a user's uploads/;
	// size is its length when known (-1 otherwise), so that a file over
	// quota is refused before anything is copied.
	Import(ctx context.Context, req ImportRequest, body io.Reader, size int64) (*ImportResult, error)
	// GetMode shows the owner, ownership mode and zone of a path as a
	// user's view shows it.
	GetMode(ctx context.Context, user, path string) (*ModeInfo, error)
	// SetMode overrides the owner or ownership mode of a path in a user's
	// view, whoever owns it.
	SetMode(ctx context.Context, user, path string, req ModeSetRequest) (*ModeInfo, error)

	// The trash (trash_api.go): list, restore and purge kept files, show
	// or set the retention (nil: show).
	ListTrash(ctx context.Context, req TrashListRequest) ([]TrashEntry, error)
	RestoreTrash(ctx context.Context, req TrashRestoreRequest) ([]TrashRestored, error)
	PurgeTrash(ctx context.Context, req TrashPurgeRequest) (*TrashPurgeResult, error)
	SetTrashSettings(ctx context.Context, retention *time.Duration) (*TrashSettings, error)
	// RestoreAt puts a subtree back as it was at a time (restore_api.go).
	RestoreAt(ctx context.Context, req RestoreAtRequest) (*RestoreAtResult, error)
}

// ImportRequest names where an imported file goes: uploads/Name of User's
// view, or uploads/Session/Name when Session is set. An existing Name is
// refused unless Replace, which swaps the new content in atomically.
type ImportRequest struct {
	User    string `json:"user"`
	Session string `json:"session,omitempty"`
	Name    string `json:"name"`
	Replace bool   `json:"replace,omitempty"`
}

// ImportResult is what an import stored: Path is as the user's view shows
// it ("uploads/S/report.pdf").
type ImportResult struct {
	User     string `json:"user"`
	Path     string `json:"path"`
	Ino      uint64 `json:"ino"`
	Size     int64  `json:"size"`
	Replaced bool   `json:"replaced"`
}

// ModeInfo is the ownership of one entry as the admin sees it. Mode is
// empty in zones without ownership modes (private, output, uploads).
type ModeInfo struct {
	User  string `json:"user"`
	Path  string `json:"path"`
	Type  string `json:"type"`
	Zone  string `json:"zone"`
	Owner string `json:"owner"`
	Mode  string `json:"mode,omitempty"`
	// SHA256 and Scan: a regular file's digest and scan state.
	SHA256 string `json:"sha256,omitempty"`
	Scan   string `json:"scan,omitempty"`
}

// ModeSetRequest changes an entry's ownership mode, its owner, or both; a
// nil field keeps the current value.
type ModeSetRequest struct {
	Mode  *string `json:"mode,omitempty"`
	Owner *string `json:"owner,omitempty"`
}

// Amount is a number of bytes and inodes, used both for what a holder uses
// and for its limit (where zero means unlimited).
type Amount struct {
	Bytes  int64 `json:"bytes"`
	Inodes int64 `json:"inodes"`
}

// UserAddRequest creates a user. Uid and Gid, when both set, make the
// user's view present every entry as owned by them; Quota, when non-zero,
// is set in the same call so a new user never runs unlimited by accident.
type UserAddRequest struct {
	Name  string  `json:"name"`
	Uid   *uint32 `json:"uid,omitempty"`
	Gid   *uint32 `json:"gid,omitempty"`
	Quota Amount  `json:"quota"`
}

// UserInfo is what the admin API tells about a user.
type UserInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Uid and Gid are the presented owner of the view; zero means the view
	// shows the stored owners (or the daemon's default).
	Uid    uint32   `json:"uid,omitempty"`
	Gid    uint32   `json:"gid,omitempty"`
	Groups []string `json:"groups"`
	Used   Amount   `json:"used"`
	Limit  Amount   `json:"limit"`
	// View is the mountpoint of the user's view in the daemon that
	// answered, empty when none is mounted.
	View string `json:"view,omitempty"`
}

// RemoveResult says what a removal deleted: entries (files, directories,
// links, not counting the zone roots) and bytes charged.
type RemoveResult struct {
	Name    string `json:"name"`
	Entries int64  `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// GroupAddRequest creates a group.
type GroupAddRequest struct {
	Name string `json:"name"`
}

// GroupInfo is what the admin API tells about a group.
type GroupInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Members []string  `json:"members"`
	Used    Amount    `json:"used"`
	Limit   Amount    `json:"limit"`
}

// MemberRequest adds a user to a group.
type MemberRequest struct {
	User string `json:"user"`
}

// QuotaSetRequest changes a holder's limits. A nil field keeps the current
// value, so bytes and inodes can be set independently; zero means
// unlimited.
type QuotaSetRequest struct {
	Bytes  *int64 `json:"bytes,omitempty"`
	Inodes *int64 `json:"inodes,omitempty"`
}

// QuotaInfo is one holder's usage against its limit.
type QuotaInfo struct {
	Holder string `json:"holder"`
	Used   Amount `json:"used"`
	Limit  Amount `json:"limit"`
	// Trash is the part of Used that kept files take: evicted, oldest
	// first, before anything is refused.
	Trash Amount `json:"trash"`
	// Snapshots is the part of Used that only snapshots still hold
	// (never evicted: freed by snapshot delete).
	Snapshots Amount `json:"snapshots"`
	// Over is how far Used is above Limit (acl.Overshoot): a limit set
	// below the usage deletes nothing, and growth is refused until it is
	// zero again.
	Over Amount `json:"over"`
}

// ViewInfo is one mounted view.
type ViewInfo struct {
	User       string `json:"user"`
	Mountpoint string `json:"mountpoint"`
}

// LockInfo is one file lock held through a view: who holds what.
type LockInfo struct {
	// User is the principal of the view the lock was taken through.
	User string `json:"user"`
	// Path is the file as that view showed it when the lock was taken.
	Path string `json:"path"`
	Ino  uint64 `json:"ino"`
	// Kind is "flock" or "posix" (an fcntl record lock, process-owned or
	// OFD).
	Kind string `json:"kind"`
	// Type is "read" (shared) or "write" (exclusive).
	Type string `json:"type"`
	// Start and Len are the byte range as fcntl gives it: Len 0 runs to
	// the end of the file.
	Start uint64 `json:"start"`
	Len   uint64 `json:"len"`
	// PID is the process that took the lock, in the daemon's PID
	// namespace.
	PID uint32 `json:"pid"`
	// Daemon is, on a store several daemons share, the one that holds
	// the lock: "HOST pid PID" (vfs/filelocks_shared.go).
	Daemon string `json:"daemon,omitempty"`
}

// CheckInfo is the record of the last fsck kept in the store.
type CheckInfo struct {
	At         time.Time `json:"at"`
	Problems   int       `json:"problems"`
	Unrepaired int       `json:"unrepaired"`
}

// Status is the state of a store and of the daemon serving it, if any.
type Status struct {
	// Daemon is true when a running daemon answered; false when the CLI
	// read the store itself.
	Daemon    bool       `json:"daemon"`
	PID       int        `json:"pid,omitempty"`
	Store     string     `json:"store"`
	MountRoot string     `json:"mount_root,omitempty"`
	Views     []ViewInfo `json:"views"`
	OpenFiles int        `json:"open_files"`
	// Locks are the file locks held through the views (none without a
	// daemon).
	Locks     []LockInfo `json:"locks"`
	Users     int        `json:"users"`
	Groups    int        `json:"groups"`
	LastCheck *CheckInfo `json:"last_check"`
	// Requests is the daemon's recent rate of FUSE requests; nil when no
	// daemon runs.
	Requests *RequestRate `json:"requests"`
	// Transport is how the kernel hands the views' requests to the
	// daemon (serve/mount --transport); empty when no daemon runs.
	Transport string `json:"transport,omitempty"`
	// Quotas is every holder's usage against its limit, as quota show.
	Quotas []QuotaInfo `json:"quotas"`
	// Size is what the store takes on disk.
	Size StoreSize `json:"size"`
	// Daemons are the other daemons serving a store on etcd (host, pid
	// and start of each), whichever was asked; none on an embedded
	// store.
	Daemons []string `json:"daemons,omitempty"`
	// Bucket is the cache of a store whose contents are in a bucket:
	// uploads pending, cache size and hits; nil for a blob directory.
	Bucket *BucketStatus `json:"bucket,omitempty"`
}

// BucketStatus is the state of this host's cache of the store's bucket.
type BucketStatus struct {
	URL string `json:"url"`
	blobs.Stats
}

// RequestRate is how many FUSE requests a daemon served lately.
type RequestRate struct {
	// PerSecond is the average over the last WindowSeconds (up to a
	// minute; less just after the daemon started).
	PerSecond     float64 `json:"per_second"`
	WindowSeconds float64 `json:"window_seconds"`
	// Total is every request since the daemon started.
	Total uint64 `json:"total"`
}

// StoreSize is what a store takes: its metadata (badger's LSM tree and
// value log, or its keys on etcd) and the file contents in blobs/.
type StoreSize struct {
	// Meta is the metadata engine: "badger" or "etcd".
	Meta      string `json:"meta"`
	LSMBytes  int64  `json:"lsm_bytes"`
	VlogBytes int64  `json:"vlog_bytes"`
	// EtcdKeys is how many keys the store has on etcd; EtcdDBBytes the
	// size of the cluster's database (every store on the cluster, and
	// history not compacted yet), EtcdDBInUse the part in use.
	EtcdKeys    int64 `json:"etcd_keys,omitempty"`
	EtcdDBBytes int64 `json:"etcd_db_bytes,omitempty"`
	EtcdDBInUse int64 `json:"etcd_db_in_use_bytes,omitempty"`
	// DataBytes is the size of the file contents. Unless DataMeasured, it
	// is the sum of the quota holders' byte usage: the files' logical
	// sizes rounded up to 4 KiB, which is cheap to read but counts holes
	// as data.
	// DataMeasured means it is the disk usage of blobs/, walked on request
	// (status --du).
	DataBytes    int64 `json:"data_bytes"`
	DataMeasured bool  `json:"data_measured"`
}

// Error codes of the admin API, stable for scripts.
const (
	CodeNotFound  = "not_found"
	CodeExists    = "exists"
	CodeInvalid   = "invalid"
	CodeHasData   = "has_data"
	CodeBusy      = "busy"
	CodeForbidden = "forbidden"
	// CodeUnauthorized: a bearer token of an agent door that is missing,
	// malformed, unknown, revoked or expired.
	CodeUnauthorized = "unauthorized"
	CodeTooLarge     = "too_large"
	CodeQuota        = "quota_exceeded"
	CodeNoSpace      = "no_space"
	CodeMethod       = "method_not_allowed"
	CodeMount        = "mount_failed"
	CodeInternal     = "internal"
)

// Error is an admin operation's failure as the operator reads it: one line
// of text and a stable code. It travels over the admin API as
// {"error": ..., "code": ...} and is rebuilt on the client side, so the CLI
// prints the same line whether it talked to a daemon or not.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"error"`
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// HTTPStatus is the status code the admin API answers e with.
func (e *Error) HTTPStatus() int {
	switch e.Code {
	case CodeNotFound:
		return http.StatusNotFound
	case CodeExists, CodeHasData, CodeBusy:
		return http.StatusConflict
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeForbidden:
		return http.StatusForbidden
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeInfected:
		return http.StatusUnprocessableEntity
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeQuota, CodeNoSpace:
		return http.StatusInsufficientStorage
	case CodeMethod:
		return http.StatusMethodNotAllowed
	default:
		return http.StatusInternalServerError
	}
}

// errorf builds an *Error.
func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// asError turns any error into an *Error, classifying store errors by
// their errno; what is a sentence to an operator is given as msg, the
// cause follows it for internal errors only.
func asError(err error, msg string) *Error {
	var e *Error
	var ae *vfs.AdminError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case errors.As(err, &ae):
		return adminError(ae)
	case errors.Is(err, syscall.ENOENT), errors.Is(err, fs.ErrNotExist):
		return &Error{Code: CodeNotFound, Message: msg}
	case errors.Is(err, syscall.EEXIST), errors.Is(err, fs.ErrExist):
		return &Error{Code: CodeExists, Message: msg}
	case errors.Is(err, syscall.EINVAL):
		return &Error{Code: CodeInvalid, Message: msg}
	case errors.Is(err, syscall.EDQUOT):
		return &Error{Code: CodeQuota, Message: msg}
	case errors.Is(err, syscall.EFBIG):
		return &Error{Code: CodeTooLarge, Message: msg}
	case errors.Is(err, metadata.ErrLocked):
		return &Error{Code: CodeBusy, Message: err.Error()}
	}
	return &Error{Code: CodeInternal, Message: fmt.Sprintf("%s: %v", msg, err)}
}

// adminError is the answer to a failure of the core's admin operations:
// its line, with the code of its errno.
func adminError(ae *vfs.AdminError) *Error {
	switch {
	case errors.Is(ae.Err, syscall.ENOSPC):
		return &Error{Code: CodeNoSpace, Message: ae.Msg}
	case errors.Is(ae.Err, syscall.EBUSY):
		return &Error{Code: CodeBusy, Message: ae.Msg}
	}
	return asError(ae.Err, ae.Msg)
}

// ValidPrincipalName checks a user or group name with the rule of
// docs/design.md, "Words", giving the one line the operator reads when it
// is not one.
func ValidPrincipalName(kind, name string) error {
	if metadata.ValidPrincipal(name) != nil {
		return errorf(CodeInvalid, "invalid %s name %q: use 1 to 64 of a-z, 0-9, '_' and '-', starting with a letter or digit", kind, name)
	}
	return nil
}
