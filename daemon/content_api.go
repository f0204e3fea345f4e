package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/metadata"
)

// CodeInfected is the error code of an import refused because the
// scanner found it infected.
const CodeInfected = "infected"

// examineImport hashes and scans the blob of an import before it is
// named; an infected import is refused with one line naming the
// signature, and the caller discards what it wrote.
func (l *Local) examineImport(ctx context.Context, ino uint64, size int64, z shedfs.Zone, what string) error {
	f, err := l.st.Blobs.OpenFile(ino, false)
	if err != nil {
		return asError(err, what)
	}
	defer f.Close()
	c, err := l.content.ExamineImport(ctx, ino, f, uint64(size), z)
	switch {
	case content.IsUnreachable(err):
		return errorf(CodeInternal, "%s refused: the virus scanner (clamd) cannot be reached, and imports are scanned before they become visible", what)
	case err != nil:
		return asError(err, what)
	case c.State == shedfs.ScanInfected:
		return errorf(CodeInfected, "%s refused: infected with %s; nothing was stored", what, c.Detail)
	}
	return nil
}

// addContent puts a regular file's digest (computed now if not known)
// and scan state into what mode get shows.
func (l *Local) addContent(info *ModeInfo, n *shedfs.Inode) {
	if !n.IsRegular() {
		return
	}
	sum, err := l.content.Digest(n.Ino)
	if err != nil {
		l.log.Warn("digest for mode get", "ino", n.Ino, "err", err)
	}
	c, err := l.content.Content(n.Ino, n.Zone)
	if err != nil {
		l.log.Warn("scan state for mode get", "ino", n.Ino, "err", err)
	}
	info.SHA256, info.Scan = sum, c.ScanLabel()
}

// QuarantineInfo is one infected file: its inode, the signature, and
// where it is named ("share/x.exe", "group:team-alpha/dir/y").
type QuarantineInfo struct {
	Ino       uint64   `json:"ino"`
	Signature string   `json:"signature"`
	Zone      string   `json:"zone"`
	Owner     string   `json:"owner"`
	Size      uint64   `json:"size"`
	Paths     []string `json:"paths"`
}

// QuarantineAdmin handles infected files: list them, release one (the
// admin decided it is clean; nothing is rescanned) or delete one with
// every name it has. Local and Client implement it.
type QuarantineAdmin interface {
	Quarantine(ctx context.Context) ([]QuarantineInfo, error)
	ReleaseQuarantined(ctx context.Context, ino uint64) (*QuarantineInfo, error)
	DeleteQuarantined(ctx context.Context, ino uint64) (*QuarantineInfo, error)
}

var (
	_ QuarantineAdmin = (*Local)(nil)
	_ QuarantineAdmin = (*Client)(nil)
)

// Quarantine lists the infected files.
func (l *Local) Quarantine(ctx context.Context) ([]QuarantineInfo, error) {
	q, err := l.st.Meta.Quarantine()
	if err != nil {
		return nil, asError(err, "read the quarantine")
	}
	out := []QuarantineInfo{}
	for _, e := range q {
		info, _, err := l.quarantined(e.Ino, e.Signature)
		if err != nil {
			continue
		}
		out = append(out, *info)
	}
	return out, nil
}

// quarantined describes one quarantined inode.
func (l *Local) quarantined(ino uint64, sig string) (*QuarantineInfo, []metadata.Name, error) {
	n, err := l.st.Meta.GetInode(ino)
	if err != nil {
		return nil, nil, asError(err, fmt.Sprintf("no file with inode %d", ino))
	}
	names, err := l.st.Meta.NamesOf(ino)
	if err != nil {
		return nil, nil, asError(err, "find the names of a quarantined file")
	}
	info := &QuarantineInfo{Ino: ino, Signature: sig, Zone: n.Zone.String(), Owner: n.Owner, Size: n.Size, Paths: []string{}}
	for _, nm := range names {
		info.Paths = append(info.Paths, n.Zone.String()+"/"+nm.Path)
	}
	return info, names, nil
}

// findQuarantined returns the quarantine entry of ino, or not_found.
func (l *Local) findQuarantined(ino uint64) (*QuarantineInfo, []metadata.Name, error) {
	q, err := l.st.Meta.Quarantine()
	if err != nil {
		return nil, nil, asError(err, "read the quarantine")
	}
	for _, e := range q {
		if e.Ino == ino {
			return l.quarantined(ino, e.Signature)
		}
	}
	return nil, nil, errorf(CodeNotFound, "inode %d is not in the quarantine (shedfs quarantine list shows it)", ino)
}

// ReleaseQuarantined ends the quarantine of ino: it opens again, as clean.
func (l *Local) ReleaseQuarantined(ctx context.Context, ino uint64) (*QuarantineInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	info, _, err := l.findQuarantined(ino)
	if err != nil {
		return nil, err
	}
	if err := l.content.Release(ino); err != nil && !errors.Is(err, metadata.ErrNotQuarantined) {
		return nil, asError(err, "release from the quarantine")
	}
	l.auditQuarantine(info, "quarantine_release")
	l.log.Info("released from the quarantine", "ino", ino, "signature", info.Signature, "paths", info.Paths)
	return info, nil
}

// DeleteQuarantined removes every name of ino; the inode goes once no
// view holds it.
func (l *Local) DeleteQuarantined(ctx context.Context, ino uint64) (*QuarantineInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	info, names, err := l.findQuarantined(ino)
	if err != nil {
		return nil, err
	}
	if err := l.core.DeleteNames(names); err != nil {
		return nil, asError(err, "delete a quarantined file")
	}
	l.content.Forget()
	l.auditQuarantine(info, "quarantine_delete")
	l.log.Info("deleted from the quarantine", "ino", ino, "signature", info.Signature, "paths", info.Paths)
	return info, nil
}

func (l *Local) auditQuarantine(info *QuarantineInfo, op string) {
	n, err := l.st.Meta.GetInode(info.Ino)
	z := shedfs.Zone{}
	if err == nil {
		z = n.Zone
	}
	p := ""
	if len(info.Paths) > 0 {
		p = info.Paths[0]
	}
	l.audit("admin", z, p, op, 0)
}

// quarantineRoutes serves the quarantine on the admin API.
func quarantineRoutes(h func(pattern string, fn endpoint), admin Admin) {
	qa, ok := admin.(QuarantineAdmin)
	if !ok {
		return
	}
	h("GET /v1/quarantine", route0(qa.Quarantine))
	h("POST /v1/quarantine/{ino}/release", route(inoParam, qa.ReleaseQuarantined))
	h("DELETE /v1/quarantine/{ino}", route(inoParam, qa.DeleteQuarantined))
}

// ParseIno reads an inode number as the quarantine commands take it.
func ParseIno(s string) (uint64, error) {
	ino, err := strconv.ParseUint(s, 10, 64)
	if err != nil || ino == 0 {
		return 0, errorf(CodeInvalid, "invalid inode number %q", s)
	}
	return ino, nil
}

func inoParam(r *http.Request) (uint64, error) { return ParseIno(r.PathValue("ino")) }

// Quarantine asks the daemon for the infected files.
func (c *Client) Quarantine(ctx context.Context) ([]QuarantineInfo, error) {
	return call[[]QuarantineInfo](c, ctx, http.MethodGet, "/v1/quarantine", nil)
}

// ReleaseQuarantined asks the daemon to release ino.
func (c *Client) ReleaseQuarantined(ctx context.Context, ino uint64) (*QuarantineInfo, error) {
	return call[*QuarantineInfo](c, ctx, http.MethodPost, fmt.Sprintf("/v1/quarantine/%d/release", ino), nil)
}

// DeleteQuarantined asks the daemon to delete ino.
func (c *Client) DeleteQuarantined(ctx context.Context, ino uint64) (*QuarantineInfo, error) {
	return call[*QuarantineInfo](c, ctx, http.MethodDelete, fmt.Sprintf("/v1/quarantine/%d", ino), nil)
}
