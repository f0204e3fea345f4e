package agentfs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Code is the kind of an error, stable for programs and models to act on.
// The set is Fileshed's, which models already know.
type Code string

// The codes.
const (
	// CodePathEscape: an absolute path, a ".." that climbs out of the
	// view root, a symlink that leads out.
	CodePathEscape Code = "PATH_ESCAPE"
	// CodeNotFound: nothing of that name (or nothing this user may see).
	CodeNotFound Code = "NOT_FOUND"
	// CodePermissionDenied: a rule of the view or the token refused.
	CodePermissionDenied Code = "PERMISSION_DENIED"
	// CodeFileLocked: another holder has an edit lock on the file.
	CodeFileLocked Code = "FILE_LOCKED"
	// CodeQuotaExceeded: the holder's byte or inode quota.
	CodeQuotaExceeded Code = "QUOTA_EXCEEDED"
	// CodeFileTooLarge: the store's max file size, or a request's bound.
	CodeFileTooLarge Code = "FILE_TOO_LARGE"
	// CodeNoSpace: the store's disk is full.
	CodeNoSpace Code = "NO_SPACE"
	// CodeExists: the target exists and the call does not replace.
	CodeExists Code = "ALREADY_EXISTS"
	// CodeNotADirectory, CodeIsADirectory, CodeNotEmpty: the kind of
	// entry does not fit the call.
	CodeNotADirectory Code = "NOT_A_DIRECTORY"
	CodeIsADirectory  Code = "IS_A_DIRECTORY"
	CodeNotEmpty      Code = "DIRECTORY_NOT_EMPTY"
	// CodeInvalidArgument: a malformed argument.
	CodeInvalidArgument Code = "INVALID_ARGUMENT"
	// CodeConflict: the file changed since the caller read it.
	CodeConflict Code = "CONFLICT"
	// CodeInternal: the daemon failed; the message says what.
	CodeInternal Code = "INTERNAL"
)

// Error is a refusal or failure of an agent door's call: a code, a
// message a model can act on, the path concerned and, for a refusal by a
// rule, the rule's name (acl's reason).
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path,omitempty"`
	Rule    string `json:"rule,omitempty"`
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Path, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func errorf(code Code, p, format string, args ...any) *Error {
	return &Error{Code: code, Path: p, Message: fmt.Sprintf(format, args...)}
}

// AsError is err as an *Error (an *Error stays itself; nil stays nil).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, shedfs.ErrPathEscape) {
		return &Error{Code: CodePathEscape, Message: err.Error()}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fromErrno(errno, "", "")
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// fromErrno is the answer for errno at path p; rule is the reason of the
// refusing decision, when a rule refused.
func fromErrno(errno syscall.Errno, p, rule string) *Error {
	e := &Error{Path: p, Rule: rule}
	switch {
	case rule == acl.ReasonEditLocked:
		e.Code, e.Message = CodeFileLocked, "another holder is editing this file (an edit lock); try again after it is saved or released, or ask its owner"
	case rule == acl.ReasonArchiveEscape:
		e.Code, e.Message = CodePathEscape, "an archive entry is absolute, climbs out with .., or is a symlink or device"
	case rule == acl.ReasonArchiveBomb:
		e.Code, e.Message = CodeFileTooLarge, "the archive would unpack past the bounds (entries, bytes, or a compression ratio of a zip bomb)"
	case rule == acl.ReasonTokenScope:
		e.Code, e.Message = CodePermissionDenied, "outside what this token may reach (its root, patterns or doors)"
	case rule == acl.ReasonTokenAccess:
		e.Code, e.Message = CodePermissionDenied, "this token does not carry that kind of access"
	case errno == syscall.ENOENT:
		e.Code, e.Message = CodeNotFound, "no such file or directory"
	case errno == syscall.EDQUOT:
		e.Code, e.Message = CodeQuotaExceeded, "the quota is used up: delete files (the trash empties by itself) or ask for more"
	case errno == syscall.EFBIG:
		e.Code, e.Message = CodeFileTooLarge, "larger than the store's max file size"
	case errno == syscall.ENOSPC:
		e.Code, e.Message = CodeNoSpace, "the store's disk is full"
	case errno == syscall.EEXIST:
		e.Code, e.Message = CodeExists, "already exists"
	case errno == syscall.ENOTDIR:
		e.Code, e.Message = CodeNotADirectory, "not a directory"
	case errno == syscall.EISDIR:
		e.Code, e.Message = CodeIsADirectory, "is a directory"
	case errno == syscall.ENOTEMPTY:
		e.Code, e.Message = CodeNotEmpty, "the directory is not empty"
	case errno == syscall.EACCES || errno == syscall.EPERM || errno == syscall.EROFS:
		e.Code, e.Message = CodePermissionDenied, "the rules of this view do not allow it"
	case errno == syscall.EINVAL || errno == syscall.ENAMETOOLONG:
		e.Code, e.Message = CodeInvalidArgument, errno.Error()
	default:
		e.Code, e.Message = CodeInternal, errno.Error()
	}
	if rule != "" && e.Code == CodePermissionDenied && rule != acl.ReasonTokenScope && rule != acl.ReasonTokenAccess {
		e.Message += " (rule " + rule + ")"
	}
	return e
}
