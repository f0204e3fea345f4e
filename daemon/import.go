package daemon

import (
	"context"
	"io"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

// Import copies body into the user's uploads/ (under uploads/Session/ when
// a session is given, creating that directory), keeping Name: the core's
// import (vfs.Admin.Import), which admits its bytes as they stream in, as
// a view's writes are, and names the file only once it is whole, durable
// and examined.
func (l *Local) Import(ctx context.Context, req ImportRequest, body io.Reader, size int64) (*ImportResult, error) {
	if err := CheckImport(req); err != nil {
		return nil, err
	}
	res, err := l.core.Admin(req.User).Import(ctx, vfs.Import{
		Session: req.Session, Name: req.Name, Replace: req.Replace,
		Body: body, Size: size, Examine: l.examineImport,
	})
	if err != nil {
		return nil, asError(err, "import of "+req.Name)
	}
	result := &ImportResult{User: req.User, Path: res.Path, Ino: res.Ino, Size: res.Size, Replaced: res.Replaced}
	l.log.Info("imported", "user", req.User, "path", res.Path, "bytes", res.Size, "replaced", res.Replaced)
	return result, nil
}

// checkImport checks the names of an import request, with the line the
// operator reads.
func CheckImport(req ImportRequest) error {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return err
	}
	if err := checkEntryName("file", req.Name); err != nil {
		return err
	}
	if req.Session != "" {
		if err := checkEntryName("session", req.Session); err != nil {
			return err
		}
	}
	return nil
}

// checkEntryName applies the name rule of a view (shedfs.CheckName) to a
// name the admin chose.
func checkEntryName(kind, name string) error {
	switch shedfs.CheckName(name) {
	case 0:
		return nil
	case syscall.ENAMETOOLONG:
		return errorf(CodeInvalid, "%s name %.40q... is too long (%d bytes; at most %d)", kind, name, len(name), shedfs.MaxNameLen)
	default:
		return errorf(CodeInvalid, "invalid %s name %q: not empty, \".\" or \"..\", and without '/' or NUL", kind, name)
	}
}

// room refuses growth of the store by bytes and inodes that its disk has
// no room for (the core's admission of the disk).
func (l *Local) room(bytes, inodes int64, what string) error {
	if err := l.core.AdminRoom(bytes, inodes, what); err != nil {
		return asError(err, what)
	}
	return nil
}
