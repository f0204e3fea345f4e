package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// A fork opens a session whose scratch starts as a copy-on-write copy of
// a snapshot of the user (--from) or of another open session's scratch
// as it is (--fork): the core makes the tree and links the blobs
// (vfs.Admin.Fork); here the source is found and the session opened
// around it.

// forkSource reads the tree a session open asks to start from; nil when
// it asks for none.
func (l *Local) forkSource(req SessionOpenRequest) (*vfs.ForkSource, error) {
	given := 0
	for _, s := range []string{req.From, req.Fork, req.Base} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, errorf(CodeInvalid, "session %s: give one of --from (a snapshot), --fork (a session) and --base (a host directory)", req.ID)
	case req.Base != "":
		return baseSource(req.Base)
	case req.From != "":
		sn, err := l.getSnapshot(req.User, req.From)
		if err != nil {
			return nil, err
		}
		es, err := l.st.Meta.SnapshotEntries(sn.ID)
		if err != nil {
			return nil, asError(err, "read snapshot "+sn.Name)
		}
		return &vfs.ForkSource{Entries: es, Snapshot: sn.ID}, nil
	case req.Fork != "":
		if err := ValidPrincipalName("session id", req.Fork); err != nil {
			return nil, err
		}
		if req.Fork == req.ID {
			return nil, errorf(CodeInvalid, "session %s cannot be a fork of itself", req.ID)
		}
		src, err := l.st.Meta.GetSession(req.User, req.Fork)
		if err != nil {
			return nil, asError(err, fmt.Sprintf("no open session %s of %s to fork", req.Fork, req.User))
		}
		root, err := l.st.Meta.GetInode(src.Root)
		if err != nil {
			return nil, asError(err, "session root")
		}
		tree, err := l.walkTree(root)
		if err != nil {
			return nil, asError(err, "walk session "+req.Fork)
		}
		es := make([]metadata.SnapEntry, 0, len(tree))
		for _, w := range tree {
			es = append(es, snapEntryOf(w))
		}
		return &vfs.ForkSource{Entries: es}, nil
	}
	return nil, nil
}

// openForked opens the session and, when asked, fills its scratch with
// the fork. A fork that fails closes the session again (its partial tree
// to the trash) and says why.
func (l *Local) openForked(ctx context.Context, req SessionOpenRequest, expires time.Time) (*metadata.Session, *SessionForked, error) {
	began := time.Now()
	src, err := l.forkSource(req)
	if err != nil {
		return nil, nil, err
	}
	start := ""
	if src != nil {
		start = startName(req.ID)
		if _, err := l.st.Meta.GetSnapshot(req.User, start); err == nil {
			return nil, nil, errorf(CodeExists, "%s has a snapshot named %s, which the fork %s would take of its start; delete it first", req.User, start, req.ID)
		}
	}
	ss, err := l.openSession(req, expires, start)
	if err != nil || src == nil {
		return ss, nil, err
	}
	out, err := l.core.Admin(req.User).Fork(ss, *src)
	if err == nil {
		_, err = l.CreateSnapshot(ctx, SnapshotCreateRequest{User: ss.User, Session: ss.ID, Name: start, unlisted: true})
	}
	if err != nil {
		if _, cerr := l.undoOpen(ss); cerr != nil {
			l.log.Error("close a session whose fork failed", "user", ss.User, "session", ss.ID, "err", cerr)
		}
		var ae *vfs.AdminError
		if errors.As(err, &ae) {
			return nil, nil, asError(err, "fork")
		}
		return nil, nil, err
	}
	what := "session " + req.Fork
	switch {
	case req.From != "":
		what = "snapshot " + req.From
	case req.Base != "":
		what = "base " + req.Base
	}
	l.log.Info("session forked", "user", ss.User, "session", ss.ID, "from", what, "entries", out.Entries, "bytes", out.Bytes)
	return ss, &SessionForked{Entries: out.Entries, Bytes: out.Bytes, Open: out.Open, Took: time.Since(began)}, nil
}

// undoOpen closes a session no view has mounted yet, its scratch to the
// trash.
func (l *Local) undoOpen(ss *metadata.Session) (string, error) {
	if err := l.st.Meta.BeginSessionClose(ss, false); err != nil {
		return "", err
	}
	return l.finishClose(ss, false)
}

// startName is the name of the snapshot a fork takes of its start, which
// session diff compares with and close deletes.
func startName(id string) string {
	name := "start-" + id
	if len(name) > 64 {
		sum := sha256.Sum256([]byte(id))
		name = "start-" + hex.EncodeToString(sum[:8])
	}
	return name
}

// dropStart deletes the snapshot of a closed session's start, if any,
// and its automatic checkpoints: they are snapshots of a scratch that is
// gone.
func (l *Local) dropStart(ss *metadata.Session) error {
	if ss.CheckpointEvery > 0 {
		if err := l.dropCheckpoints(ss, 0); err != nil {
			return err
		}
	}
	if ss.Start == "" {
		return nil
	}
	sn, err := l.st.Meta.GetSnapshot(ss.User, ss.Start)
	if errors.Is(err, syscall.ENOENT) || err == nil && sn.Session != ss.ID {
		return nil
	}
	if err != nil {
		return asError(err, "snapshot "+ss.Start)
	}
	return l.deleteSnapshot(*sn)
}

// abandonForks closes, to the trash, every open session whose fork a
// previous run did not complete: the fork's last step is the snapshot of
// its start, so a session whose start snapshot is missing was cut short,
// and is taken back as if it had never opened (its partial tree in the
// trash; the blobs linked for records never written are fsck's).
func (l *Local) abandonForks() error {
	list, err := l.st.Meta.ListSessions("")
	if err != nil {
		return asError(err, "list sessions")
	}
	for i := range list {
		ss := &list[i]
		if ss.Start == "" {
			continue
		}
		if _, err := l.st.Meta.GetSnapshot(ss.User, ss.Start); !errors.Is(err, syscall.ENOENT) {
			continue
		}
		if _, err := l.undoOpen(ss); err != nil {
			return fmt.Errorf("close session %s of %s, whose fork was cut short: %w", ss.ID, ss.User, err)
		}
		l.log.Warn("session whose fork was cut short closed", "user", ss.User, "session", ss.ID)
	}
	return nil
}

// startInUse refuses, as busy, deleting the start snapshot of an open
// session: session diff compares with it, and its absence marks a fork
// cut short (abandonForks).
func (l *Local) startInUse(sn *metadata.Snapshot) error {
	if sn.Session == "" {
		return nil
	}
	ss, err := l.st.Meta.GetSession(sn.User, sn.Session)
	if err != nil || ss.Start != sn.Name {
		return nil
	}
	return errorf(CodeBusy, "snapshot %s is the start of open session %s of %s (session diff compares with it); it goes with the session's close", sn.Name, ss.ID, ss.User)
}
