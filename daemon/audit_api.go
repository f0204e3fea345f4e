package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// This file is the audit trail's part of the admin API: GET /v1/audit,
// and POST /v1/audit/flush, which the CLI calls before it reads.
// Badger is single-process, so while a daemon runs `shedfs audit` can only
// read the trail through it; both Local and Client answer AuditReader, so
// the command reads the same records either way.

// MaxAuditAnswer bounds the records of one GET /v1/audit answer; Client
// pages through longer results with the ID cursor.
const MaxAuditAnswer = 10000

// AuditReader reads the audit trail. Local and Client implement it, so
// the CLI asks the Admin it got whether it can read the trail.
type AuditReader interface {
	// Audit calls fn for every record f selects, oldest first.
	Audit(ctx context.Context, f metadata.AuditFilter, fn func(metadata.AuditRecord) error) error
	// FlushAudit returns once every event recorded before the call is in
	// the trail: the daemon's recorder writes in batches, and a reader
	// right after a refusal would otherwise miss it.
	FlushAudit(ctx context.Context) error
}

var (
	_ AuditReader = (*Local)(nil)
	_ AuditReader = (*Client)(nil)
)

// Audit reads the trail from the open store.
func (l *Local) Audit(ctx context.Context, f metadata.AuditFilter, fn func(metadata.AuditRecord) error) error {
	err := l.st.Meta.QueryAudit(f, func(r metadata.AuditRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(r)
	})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if errors.Is(err, syscall.EINVAL) {
			return errorf(CodeInvalid, "audit: %v", err)
		}
		return asError(err, "read audit trail")
	}
	return nil
}

// FlushAudit stores what the recorder of this process's core holds; the
// CLI's own core records nothing, so it has nothing to flush.
func (l *Local) FlushAudit(ctx context.Context) error {
	if err := l.core.FlushRecords(); err != nil {
		return asError(err, "flush audit trail")
	}
	return nil
}

// FlushAudit asks the daemon to store the events its recorder holds.
func (c *Client) FlushAudit(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/audit/flush", nil, nil)
}

// Audit asks the daemon for the trail, in pages of at most MaxAuditAnswer
// records. A Limit above MaxAuditAnswer is refused unless Oldest is set.
func (c *Client) Audit(ctx context.Context, f metadata.AuditFilter, fn func(metadata.AuditRecord) error) error {
	if f.Limit < 0 || (f.Limit > MaxAuditAnswer && !f.Oldest) {
		return errorf(CodeInvalid, "audit: limit must be 0 to %d", MaxAuditAnswer)
	}
	want := f.Limit // 0: everything
	if want != 0 && !f.Oldest {
		var page []metadata.AuditRecord
		if err := c.do(ctx, http.MethodGet, "/v1/audit?"+auditQuery(f).Encode(), nil, &page); err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	q := f
	q.Oldest = true
	got := 0
	for {
		q.Limit = MaxAuditAnswer
		if want > 0 {
			q.Limit = min(MaxAuditAnswer, want-got)
		}
		var page []metadata.AuditRecord
		if err := c.do(ctx, http.MethodGet, "/v1/audit?"+auditQuery(q).Encode(), nil, &page); err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		got += len(page)
		if len(page) < q.Limit || (want > 0 && got >= want) {
			return nil
		}
		q.After = page[len(page)-1].ID
	}
}

// auditQuery is the query string of a filter.
func auditQuery(f metadata.AuditFilter) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("user", f.User)
	set("session", f.Session)
	set("door", f.Door)
	set("zone", f.Zone)
	set("op", f.Op)
	set("after", f.After)
	if f.Denied {
		v.Set("denied", "true")
	}
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if f.Oldest {
		v.Set("oldest", "true")
	}
	v.Set("limit", strconv.Itoa(f.Limit))
	return v
}

// parseAuditQuery is the inverse of auditQuery, strict like decode: an
// unknown parameter or a bad value is an error, and the answer is bounded.
func parseAuditQuery(r *http.Request) (metadata.AuditFilter, error) {
	var f metadata.AuditFilter
	q := r.URL.Query()
	for k, vs := range q {
		switch k {
		case "user", "session", "door", "zone", "op", "after", "denied", "since", "oldest", "limit":
			if len(vs) != 1 {
				return f, errorf(CodeInvalid, "audit: parameter %q given %d times", k, len(vs))
			}
		default:
			return f, errorf(CodeInvalid, "audit: unknown parameter %q", k)
		}
	}
	f.User, f.Zone, f.Op, f.After = q.Get("user"), q.Get("zone"), q.Get("op"), q.Get("after")
	f.Session = q.Get("session")
	f.Door = q.Get("door")
	var err error
	boolean := func(k string) bool {
		if s := q.Get(k); s != "" && err == nil {
			var b bool
			if b, err = strconv.ParseBool(s); err != nil {
				err = errorf(CodeInvalid, "audit: %s=%q: not a boolean", k, s)
			}
			return b
		}
		return false
	}
	f.Denied, f.Oldest = boolean("denied"), boolean("oldest")
	if err != nil {
		return f, err
	}
	if s := q.Get("since"); s != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return f, errorf(CodeInvalid, "audit: since=%q: not an RFC 3339 time", s)
		}
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > MaxAuditAnswer {
		return f, errorf(CodeInvalid, "audit: limit=%q: give 1 to %d", q.Get("limit"), MaxAuditAnswer)
	}
	f.Limit = n
	return f, nil
}

// auditRoutes adds GET /v1/audit to the admin API, when admin can read the
// trail.
func auditRoutes(h func(pattern string, fn endpoint), admin Admin) {
	ar, ok := admin.(AuditReader)
	if !ok {
		return
	}
	h("GET /v1/audit", route(parseAuditQuery, func(ctx context.Context, f metadata.AuditFilter) ([]metadata.AuditRecord, error) {
		out := []metadata.AuditRecord{}
		err := ar.Audit(ctx, f, func(rec metadata.AuditRecord) error {
			out = append(out, rec)
			return nil
		})
		return out, err
	}))
	h("POST /v1/audit/flush", route0(func(ctx context.Context) (struct{}, error) {
		return struct{}{}, ar.FlushAudit(ctx)
	}))
}
