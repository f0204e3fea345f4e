package metadata

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// This file keeps the audit trail: one record per change or denial, keyed
// by time so that "what happened since" is one seek and retention deletes
// from the front. The queueing in front of it lives in package audit; the
// store only knows records.

// pAudit prefixes audit records. The bare one-byte key holds the number of
// records, kept in the same transaction as every append and delete so that
// retention by count never has to scan the trail.
const pAudit = 'A'

// auditKeyLen is the prefix byte, unix nanoseconds and a sequence number.
const auditKeyLen = 1 + 8 + 4

// auditBatch is how many records one append or delete transaction holds,
// well below badger's transaction size limit; a transaction badger still
// finds too big is halved.
const auditBatch = 1000

// OpAuditOverflow is the operation of the synthetic record the recorder
// writes when events were dropped because its queue was full, so that the
// trail itself says what it is missing.
const OpAuditOverflow = "audit_overflow"

// ResultOK is the result of a change that happened; denials carry the
// errno's name ("EACCES").
const ResultOK = "ok"

// AuditRecord is one entry of the audit trail. Its JSON form is what the
// admin API and `shedfs audit --json` show, so the field names are part of
// the interface scripts read.
type AuditRecord struct {
	// ID orders records and is the cursor of a follow-up query
	// (AuditFilter.After); AppendAudit assigns it.
	ID   string    `json:"id,omitempty"`
	Time time.Time `json:"time"`
	// User is the principal that acted; View the user the view belongs to
	// (the same user today, kept apart so that delegated views need no
	// schema change).
	User string `json:"user"`
	View string `json:"view,omitempty"`
	// Zone is Zone.String() of the zone acted in ("private:alice").
	Zone string `json:"zone,omitempty"`
	// Path is the path in the view at the time of the event.
	Path string `json:"path,omitempty"`
	Op   string `json:"op"`
	// Result is ResultOK or the errno name of a denial.
	Result string `json:"result"`
	// Rule is the acl reason of a denial: what an operator reads.
	Rule  string `json:"rule,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// Link and Client are, for a share-by-link request (op download),
	// the link's ID and the HTTP client's address.
	Link   string `json:"link,omitempty"`
	Client string `json:"client,omitempty"`
	// SHA256 and Scan are the content's digest and scan state in a
	// write-close, and the scan state (with an infected file's
	// signature) in a refusal by it.
	SHA256 string `json:"sha256,omitempty"`
	Scan   string `json:"scan,omitempty"`
	// Session is the session whose view acted (docs/design.md,
	// "Sessions"), empty for a main view.
	Session string `json:"session,omitempty"`
	// Door is the way in the event came through ("fuse" for a view),
	// empty for the admin API and the daemon's own.
	Door string `json:"door,omitempty"`
	// Token and TokenReason are the id and the reason of the bearer
	// token of an agent door's request.
	Token       string `json:"token,omitempty"`
	TokenReason string `json:"token_reason,omitempty"`
	// Host is the daemon that wrote the record ("host pid N") when
	// several daemons share the store, so that one trail read on any
	// host tells them apart; empty on an embedded store.
	Host string `json:"host,omitempty"`
	// Dropped is, in an OpAuditOverflow record, how many events were lost
	// since the previous such record.
	Dropped uint64 `json:"dropped,omitempty"`
}

// Denied reports whether the record is a refusal.
func (r *AuditRecord) Denied() bool {
	return r.Result != ResultOK && r.Op != OpAuditOverflow
}

// auditValue is the stored form of a record: short names, the time lives
// in the key, the view only when it differs from the user.
type auditValue struct {
	User    string `json:"u,omitempty"`
	View    string `json:"v,omitempty"`
	Zone    string `json:"z,omitempty"`
	Path    string `json:"p,omitempty"`
	Op      string `json:"o"`
	Result  string `json:"r,omitempty"`
	Rule    string `json:"w,omitempty"`
	Bytes   int64  `json:"b,omitempty"`
	Dropped uint64 `json:"n,omitempty"`
	Link    string `json:"l,omitempty"`
	Client  string `json:"c,omitempty"`
	SHA256  string `json:"h,omitempty"`
	Scan    string `json:"s,omitempty"`
	Session string `json:"e,omitempty"`
	Door    string `json:"g,omitempty"`
	Token   string `json:"k,omitempty"`
	TokenR  string `json:"q,omitempty"`
	Host    string `json:"d,omitempty"`
}

// AuditFilter selects records. Zero fields select everything.
type AuditFilter struct {
	User string
	// Session keeps the records made through that session's view.
	Session string
	// Door keeps the records of changes and refusals that came through
	// that door ("fuse", "mcp", "api").
	Door string
	// Zone matches Zone.String() exactly, or a zone kind alone ("group"
	// matches every group zone).
	Zone   string
	Op     string
	Denied bool // refusals only
	Since  time.Time
	// After is the ID of a record already seen: only later ones match.
	After string
	// Limit keeps the newest Limit matching records (like tail -n), or
	// the oldest ones when Oldest is set; 0 means all.
	Limit  int
	Oldest bool
}

func (f *AuditFilter) match(r *AuditRecord) bool {
	if f.User != "" && r.User != f.User {
		return false
	}
	if f.Session != "" && r.Session != f.Session {
		return false
	}
	if f.Door != "" && r.Door != f.Door {
		return false
	}
	if f.Zone != "" && r.Zone != f.Zone {
		kind, _, _ := strings.Cut(r.Zone, ":")
		if kind != f.Zone {
			return false
		}
	}
	if f.Op != "" && r.Op != f.Op {
		return false
	}
	if f.Denied && !r.Denied() {
		return false
	}
	return true
}

func auditCountKey() []byte { return []byte{pAudit} }

func auditKey(nanos int64, seq uint32) []byte {
	k := make([]byte, auditKeyLen)
	k[0] = pAudit
	binary.BigEndian.PutUint64(k[1:9], uint64(nanos))
	binary.BigEndian.PutUint32(k[9:], seq)
	return k
}

// auditID is the printable form of a record key (without the prefix).
func auditID(k []byte) string { return hex.EncodeToString(k[1:]) }

// parseAuditID is the inverse of auditID, EINVAL for anything else.
func parseAuditID(id string) ([]byte, error) {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != auditKeyLen-1 {
		return nil, fmt.Errorf("audit cursor %q: %w", id, syscall.EINVAL)
	}
	return append([]byte{pAudit}, b...), nil
}

func decodeAudit(k, v []byte) (AuditRecord, error) {
	if len(k) != auditKeyLen {
		return AuditRecord{}, fmt.Errorf("audit key %x: %w", k, ErrCorrupt)
	}
	var av auditValue
	if err := json.Unmarshal(v, &av); err != nil {
		return AuditRecord{}, fmt.Errorf("audit record %x: %w: %v", k, ErrCorrupt, err)
	}
	view := av.View
	if view == "" {
		view = av.User
	}
	return AuditRecord{
		ID:          auditID(k),
		Time:        time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))),
		User:        av.User,
		View:        view,
		Zone:        av.Zone,
		Path:        av.Path,
		Op:          av.Op,
		Result:      av.Result,
		Rule:        av.Rule,
		Bytes:       av.Bytes,
		Dropped:     av.Dropped,
		Link:        av.Link,
		Client:      av.Client,
		SHA256:      av.SHA256,
		Scan:        av.Scan,
		Session:     av.Session,
		Door:        av.Door,
		Token:       av.Token,
		TokenReason: av.TokenR,
		Host:        av.Host,
	}, nil
}

func readAuditCount(tx Txn) (int64, error) {
	v, err := tx.Get(auditCountKey())
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read audit count: %w", err)
	}
	n, err := decodeU64(v)
	if err != nil {
		return 0, fmt.Errorf("audit count: %w", err)
	}
	return int64(n), nil
}

// AppendAudit stores records, in time order of their Time (a zero Time is
// now). Each batch of records is one transaction; a crash keeps whole
// batches. Records with the same nanosecond get increasing sequence
// numbers, so none overwrites another, even from concurrent callers.
func (s *Store) AppendAudit(records []AuditRecord) error {
	size := auditBatch
	for len(records) > 0 {
		n := min(size, len(records))
		err := s.appendAudit(records[:n])
		if err != nil && n > 1 && isTxnTooBig(err) {
			size = max(1, n/2)
			continue
		}
		if err != nil {
			return fmt.Errorf("append %d audit records: %w", n, err)
		}
		records = records[n:]
	}
	return nil
}

func (s *Store) appendAudit(records []AuditRecord) error {
	now := time.Now()
	return s.update(func(o *op) error {
		count, err := readAuditCount(o.tx)
		if err != nil {
			return err
		}
		enc := make([]byte, 0, 160*len(records))
		for i := range records {
			r := &records[i]
			t := r.Time
			if t.IsZero() {
				t = now
			}
			av := auditValue{
				User: r.User, Zone: r.Zone, Path: r.Path, Op: r.Op,
				Result: r.Result, Rule: r.Rule, Bytes: r.Bytes, Dropped: r.Dropped,
				Link: r.Link, Client: r.Client,
				SHA256: r.SHA256, Scan: r.Scan, Session: r.Session, Door: r.Door,
				Token: r.Token, TokenR: r.TokenReason,
				Host: s.host,
			}
			if r.View != r.User {
				av.View = r.View
			}
			// One buffer for the batch: each value is its own
			// full slice of it, which later appends never touch.
			start := len(enc)
			enc = appendAuditValue(enc, &av)
			v := enc[start:len(enc):len(enc)]
			// The sequence number keeps two records of one nanosecond
			// apart without reading the key first: within a process
			// the counter only grows, and daemons sharing a store
			// start theirs at random points.
			k := auditKey(t.UnixNano(), s.auditSeq.Add(1))
			if err := o.tx.Set(k, v); err != nil {
				return err
			}
			count++
		}
		return o.tx.Set(auditCountKey(), encodeU64(uint64(count)))
	})
}

// QueryAudit calls fn for every record filter selects, oldest first. An
// error from fn ends the query and is returned.
func (s *Store) QueryAudit(filter AuditFilter, fn func(AuditRecord) error) error {
	if filter.Limit < 0 {
		return fmt.Errorf("audit query: negative limit %d: %w", filter.Limit, syscall.EINVAL)
	}
	start := []byte{pAudit, 0}
	if !filter.Since.IsZero() && filter.Since.UnixNano() > 0 {
		start = auditKey(filter.Since.UnixNano(), 0)
	}
	var after []byte
	if filter.After != "" {
		k, err := parseAuditID(filter.After)
		if err != nil {
			return err
		}
		after = k
		if string(after) >= string(start) {
			start = append(append([]byte{}, after...), 0)
		}
	}
	// Newest Limit records: keep a ring of the last matches, deliver after.
	tail := filter.Limit > 0 && !filter.Oldest
	var ring []AuditRecord
	next, matched := 0, 0
	var ferr error
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pAudit}, start, func(k, v []byte) error {
			if len(k) == 1 {
				return nil
			}
			r, err := decodeAudit(k, v)
			if err != nil {
				return err
			}
			if !filter.match(&r) {
				return nil
			}
			matched++
			if tail {
				if len(ring) < filter.Limit {
					ring = append(ring, r)
				} else {
					ring[next] = r
					next = (next + 1) % filter.Limit
				}
				return nil
			}
			if ferr = fn(r); ferr != nil {
				return errStopScan
			}
			if filter.Limit > 0 && matched >= filter.Limit {
				return errStopScan
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("audit query: %w", err)
	}
	if ferr != nil {
		return ferr
	}
	for i := range ring {
		if err := fn(ring[(next+i)%len(ring)]); err != nil {
			return err
		}
	}
	return nil
}

// AuditCount is the number of records in the trail.
func (s *Store) AuditCount() (int64, error) {
	var n int64
	err := s.kv.View(func(tx Txn) error {
		var err error
		n, err = readAuditCount(tx)
		return err
	})
	return n, err
}

// PruneAudit deletes records older than maxAge, then the oldest ones
// beyond maxRecords. Zero or negative disables either limit. It deletes in
// transactions of a bounded size, so a long prune never holds one huge
// transaction, and appends can go on meanwhile.
func (s *Store) PruneAudit(maxAge time.Duration, maxRecords int) (removed int, err error) {
	if s.readOnly {
		return 0, syscall.EROFS
	}
	var cutoff []byte
	if maxAge > 0 {
		cutoff = auditKey(time.Now().Add(-maxAge).UnixNano(), 0)
	}
	for {
		var keys [][]byte
		err := s.kv.View(func(tx Txn) error {
			count, err := readAuditCount(tx)
			if err != nil {
				return err
			}
			excess := int64(0)
			if maxRecords > 0 {
				excess = count - int64(maxRecords)
			}
			return tx.Scan([]byte{pAudit}, []byte{pAudit, 0}, func(k, _ []byte) error {
				if len(keys) >= auditBatch {
					return errStopScan
				}
				old := cutoff != nil && string(k) < string(cutoff)
				if !old && int64(len(keys)) >= excess {
					return errStopScan
				}
				keys = append(keys, append([]byte(nil), k...))
				return nil
			})
		})
		if err != nil {
			return removed, fmt.Errorf("prune audit trail: %w", err)
		}
		if len(keys) == 0 {
			return removed, nil
		}
		n := 0
		err = s.kv.Update(func(tx Txn) error {
			n = 0
			count, err := readAuditCount(tx)
			if err != nil {
				return err
			}
			for _, k := range keys {
				// Only what is still there counts, should two prunes race.
				if _, err := tx.Get(k); errors.Is(err, ErrNotFound) {
					continue
				} else if err != nil {
					return err
				}
				if err := tx.Delete(k); err != nil {
					return err
				}
				n++
			}
			return tx.Set(auditCountKey(), encodeU64(uint64(max(0, count-int64(n)))))
		})
		if err != nil {
			return removed, fmt.Errorf("prune audit trail: %w", err)
		}
		removed += n
		if n == 0 {
			return removed, nil
		}
	}
}
