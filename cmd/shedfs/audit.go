package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/audit"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/tokens"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/web"
)

// followEvery is how often --follow asks for new records.
const followEvery = 500 * time.Millisecond

// followLookback is how far back in time each --follow poll looks again:
// records are keyed by the time of the event but stored in batches a
// little later, so one can land behind a record already shown.
const followLookback = 5 * time.Second

// auditFlags are the audit trail settings of the commands that serve
// views (serve, mount); startAudit reads them.
func auditFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-audit", Usage: "keep no audit trail"},
		&cli.StringFlag{Name: "audit-max-age", Value: "30d", Usage: "drop audit records older than this (e.g. 7d, 12h; 0: keep forever)"},
		&cli.IntFlag{Name: "audit-max-records", Value: audit.DefaultMaxRecords, Usage: "keep at most this many audit records, dropping the oldest (0: no limit)"},
		&cli.DurationFlag{Name: "audit-retention-interval", Value: audit.DefaultRetentionInterval, Usage: "how often old audit records are pruned"},
		&cli.IntFlag{Name: "audit-queue", Value: audit.DefaultQueueSize, Usage: "audit events that may wait to be written; beyond, events are dropped, counted and reported in the trail"},
	}
}

// startAudit starts the audit recorder the auditFlags ask for, nil with
// --no-audit. The caller sets it as fusefs.Options.Recorder and closes it
// after the views stop and before the store closes.
func startAudit(c *cli.Context, st *daemon.Store, log *slog.Logger) (*audit.Recorder, error) {
	if c.Bool("no-audit") {
		return nil, nil
	}
	opts := audit.Options{QueueSize: c.Int("audit-queue"), RetentionInterval: c.Duration("audit-retention-interval"), Logger: log}
	if st.Space != nil {
		opts.Short = st.Space.Short
	}
	if opts.RetentionInterval <= 0 {
		return nil, fmt.Errorf("--audit-retention-interval %s: must be positive", opts.RetentionInterval)
	}
	if opts.QueueSize < 1 {
		return nil, fmt.Errorf("--audit-queue %d: must be at least 1", opts.QueueSize)
	}
	age, err := parseAge(c.String("audit-max-age"))
	if err != nil {
		return nil, fmt.Errorf("--audit-max-age: %w", err)
	}
	opts.MaxAge = age
	if age == 0 {
		opts.MaxAge = -1
	}
	switch n := c.Int("audit-max-records"); {
	case n < 0:
		return nil, fmt.Errorf("--audit-max-records %d: must be 0 (no limit) or more", n)
	case n == 0:
		opts.MaxRecords = -1
	default:
		opts.MaxRecords = n
	}
	return audit.New(st.Meta, opts), nil
}

// parseAge reads a duration that may also be given in days ("30d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(d, 64); err == nil && n >= 0 {
			return time.Duration(n * float64(24*time.Hour)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: give a duration such as 30d, 12h or 0", s)
	}
	return d, nil
}

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "show the audit trail: changes and denials, oldest first",
		Description: "Reads through the running daemon when one serves the store, from the store itself otherwise.\n" +
			"--since takes a duration back from now (90s, 1h, 7d) or a time (2026-01-02, RFC 3339).",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "user", Usage: "only records of this principal"},
			&cli.StringFlag{Name: "session", Usage: "only records made through this session's view"},
			&cli.StringFlag{Name: "door", Usage: "only records of what came through this door: fuse (the views), admin (the admin API and command line), link (the link server), mcp or api"},
			&cli.StringFlag{Name: "zone", Usage: "only this zone (share, group:team, private:alice) or zone kind (group, uploads)"},
			&cli.StringFlag{Name: "op", Usage: "only this operation (write, create, unlink, rename, setxattr, audit_overflow, ...)"},
			&cli.BoolFlag{Name: "denied", Usage: "only denials"},
			&cli.StringFlag{Name: "since", Usage: "only records since this long ago or this time"},
			&cli.IntFlag{Name: "limit", Usage: "only the newest N records (0: all)"},
			jsonFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new records until interrupted"},
		},
		Action: runAudit,
	}
}

func runAudit(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("audit: takes no arguments (filter with --user, --zone, --op, --denied, --since)")
	}
	f, err := auditFilter(c, time.Now())
	if err != nil {
		return err
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if c.Bool("follow") {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	c.Context = ctx
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		ar, ok := a.(daemon.AuditReader)
		if !ok {
			return errors.New("audit: this daemon cannot read the audit trail")
		}
		// A daemon's recorder writes in batches: what was refused a moment
		// ago may still wait in one. A daemon from before the flush
		// endpoint answers not_found or method_not_allowed; read anyway.
		if err := ar.FlushAudit(ctx); err != nil && !oldDaemon(err) {
			return err
		}
		out := newAuditPrinter(c.App.Writer, c.Bool("json"))
		if !c.Bool("follow") {
			if err := ar.Audit(ctx, f, out.add); err != nil {
				return err
			}
			return out.flush()
		}
		return follow(ctx, ar, f, out)
	})
}

// auditFilter reads the filter flags, checking each so that a typo is an
// error rather than an empty answer.
func auditFilter(c *cli.Context, now time.Time) (metadata.AuditFilter, error) {
	f := metadata.AuditFilter{
		User:   c.String("user"),
		Zone:   c.String("zone"),
		Op:     c.String("op"),
		Denied: c.Bool("denied"),
		Limit:  c.Int("limit"),

		Session: c.String("session"),
		Door:    c.String("door"),
	}
	if f.User != "" {
		if err := daemon.ValidPrincipalName("user", f.User); err != nil {
			return f, fmt.Errorf("--user: %w", err)
		}
	}
	if f.Session != "" {
		if err := daemon.ValidPrincipalName("session id", f.Session); err != nil {
			return f, fmt.Errorf("--session: %w", err)
		}
	}
	doors := append([]string{vfs.DoorFUSE, vfs.DoorAdmin, web.Door}, tokens.Doors...)
	if f.Door != "" && !slices.Contains(doors, f.Door) {
		return f, fmt.Errorf("--door %q: one of %s", f.Door, strings.Join(doors, ", "))
	}
	if f.Zone != "" && !validZoneFilter(f.Zone) {
		return f, fmt.Errorf("--zone %q: not a zone (private:alice, output:alice, uploads:alice, share, group:team) nor a zone kind", f.Zone)
	}
	if f.Limit < 0 {
		return f, fmt.Errorf("--limit %d: must be 0 (all) or more", f.Limit)
	}
	if f.Limit > daemon.MaxAuditAnswer {
		return f, fmt.Errorf("--limit %d: at most %d; narrow with --since instead", f.Limit, daemon.MaxAuditAnswer)
	}
	if s := c.String("since"); s != "" {
		t, err := parseSince(s, now)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	return f, nil
}

// oldDaemon reports an admin API error that says the daemon does not
// know the endpoint at all.
func oldDaemon(err error) bool {
	var e *daemon.Error
	return errors.As(err, &e) && (e.Code == daemon.CodeNotFound || e.Code == daemon.CodeMethod)
}

// auditWho is the user column: the user, user@session for what a
// session's view did, and "" (shown as a plain "-") for what no user did:
// the daemon's own records (trash expiry, an overflow report) and
// anonymous link downloads, stored with user "-", which no user name can
// be.
func auditWho(r metadata.AuditRecord) string {
	if r.User == shedfs.NoUser && r.Session == "" {
		return ""
	}
	if r.Session != "" {
		return r.User + "@" + r.Session
	}
	return r.User
}

func validZoneFilter(z string) bool {
	switch z {
	case "private", "output", "uploads", "share", "group", "session":
		return true
	}
	_, err := shedfs.ParseZone(z)
	return err == nil
}

// parseSince reads --since: a duration back from now ("90s", "1h",
// "7d"), or a date or RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if strings.HasPrefix(s, "-") {
		return time.Time{}, fmt.Errorf("--since %q: give how long ago, not a negative duration", s)
	}
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q: give a duration (90s, 1h, 7d) or a time (2006-01-02, 2006-01-02T15:04:05Z)", s)
}

// follow prints what f selects now, then polls for new records until ctx
// ends. Each poll looks followLookback back and skips what it printed, so
// that a record stored a little late is not missed.
func follow(ctx context.Context, ar daemon.AuditReader, f metadata.AuditFilter, out *auditPrinter) error {
	start := time.Now()
	seen := map[string]time.Time{}
	var oldest time.Time
	if err := ar.Audit(ctx, f, func(r metadata.AuditRecord) error {
		seen[r.ID] = r.Time
		if oldest.IsZero() {
			oldest = r.Time
		}
		return out.add(r)
	}); err != nil {
		return err
	}
	if err := out.flush(); err != nil {
		return err
	}
	// Nothing older than what the first answer covered is new: with
	// --limit, older records were left out on purpose.
	floor := start.Add(-followLookback)
	if f.Limit > 0 && !oldest.IsZero() {
		floor = oldest
	}
	if f.Since.After(floor) {
		floor = f.Since
	}
	poll := f
	poll.Limit = 0
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	lastPoll := start
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		poll.Since = lastPoll.Add(-followLookback)
		if poll.Since.Before(floor) {
			poll.Since = floor
		}
		lastPoll = time.Now()
		err := ar.Audit(ctx, poll, func(r metadata.AuditRecord) error {
			if _, ok := seen[r.ID]; ok {
				return nil
			}
			seen[r.ID] = r.Time
			return out.add(r)
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := out.flush(); err != nil {
			return err
		}
		for id, t := range seen {
			if t.Before(poll.Since) {
				delete(seen, id)
			}
		}
	}
}

// auditPrinter writes records as an aligned table, or as JSON lines.
type auditPrinter struct {
	w      io.Writer
	json   *json.Encoder
	rows   [][]string
	header bool
}

func newAuditPrinter(w io.Writer, asJSON bool) *auditPrinter {
	p := &auditPrinter{w: w}
	if asJSON {
		p.json = json.NewEncoder(w)
	}
	return p
}

func (p *auditPrinter) add(r metadata.AuditRecord) error {
	if p.json != nil {
		if err := p.json.Encode(r); err != nil {
			return fmt.Errorf("write JSON: %w", err)
		}
		return nil
	}
	path := r.Path
	if r.Op == metadata.OpAuditOverflow {
		path = fmt.Sprintf("(%d events lost)", r.Dropped)
	}
	rule := r.Rule
	if r.Scan != "" && r.Denied() {
		// A refusal by scan state names it: infected:<signature>.
		rule += " (" + r.Scan + ")"
	}
	p.rows = append(p.rows, []string{
		r.Time.Local().Format("2006-01-02 15:04:05.000"),
		cell(auditWho(r)), cell(r.Zone), cell(r.Op), cell(path), cell(r.Result), cell(rule),
	})
	return nil
}

// flush prints the rows gathered so far, after the header the first
// time: an empty answer prints the header alone, so that it reads as
// "nothing matched" rather than as a command that did nothing.
func (p *auditPrinter) flush() error {
	if p.json != nil || (p.header && len(p.rows) == 0) {
		return nil
	}
	tw := table(p.w)
	if !p.header {
		fmt.Fprintln(tw, "TIME\tUSER\tZONE\tOP\tPATH\tRESULT\tRULE")
		p.header = true
	}
	for _, row := range p.rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	p.rows = p.rows[:0]
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
