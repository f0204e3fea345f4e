package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// Auto-checkpoints: a session opened with --checkpoint-every D is
// snapshotted by the daemon that serves its view every D while its
// scratch changes (a walk of its records finds whether it did: what a
// writer still holds open is seen at its flush), and only the last N of
// those snapshots are kept. They are ordinary snapshots of the session,
// shown in its snapshots/ and charged like any.

const (
	// minCheckpointEvery bounds the walks a session can cost.
	minCheckpointEvery = 10 * time.Second
	defaultCheckpoints = 5
	// checkpointPrefix starts the names of automatic checkpoints.
	checkpointPrefix = "auto-"
)

// checkpointsOf reads the checkpoint settings of an open request into
// the session record.
func checkpointsOf(req SessionOpenRequest, ss *metadata.Session) error {
	if req.CheckpointEvery == "" {
		if req.CheckpointKeep != 0 {
			return errorf(CodeInvalid, "session %s: --checkpoint-keep needs --checkpoint-every", req.ID)
		}
		return nil
	}
	every, err := time.ParseDuration(req.CheckpointEvery)
	if err != nil || every < minCheckpointEvery {
		return errorf(CodeInvalid, "checkpoint interval %q: give a duration of %v or more", req.CheckpointEvery, minCheckpointEvery)
	}
	if req.CheckpointKeep < 0 {
		return errorf(CodeInvalid, "session %s: --checkpoint-keep must not be negative", req.ID)
	}
	ss.CheckpointEvery, ss.CheckpointKeep = every, req.CheckpointKeep
	if ss.CheckpointKeep == 0 {
		ss.CheckpointKeep = defaultCheckpoints
	}
	return nil
}

// checkpointState is what the loop knows of one session: the tree's
// fingerprint at the last look, and when to look next.
type checkpointState struct {
	sum  string
	next time.Time
}

// checkpoints takes the sessions' automatic checkpoints until stop
// closes.
func (d *Daemon) checkpoints(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	state := map[string]*checkpointState{}
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			list, err := d.cfg.Store.Meta.ListSessions("")
			if err != nil {
				d.log.Error("list sessions", "err", err)
				continue
			}
			seen := map[string]bool{}
			for i := range list {
				ss := &list[i]
				if ss.CheckpointEvery <= 0 {
					continue
				}
				key := sessionKey(ss.User, ss.ID)
				seen[key] = true
				if err := d.local.checkpoint(ss, state, key, now); err != nil {
					d.log.Warn("session checkpoint", "user", ss.User, "session", ss.ID, "err", err)
				}
			}
			for k := range state {
				if !seen[k] {
					delete(state, k)
				}
			}
		}
	}
}

// checkpoint looks at one session when its time has come: a snapshot
// when its tree changed since the last look (the first look only
// records it), then the oldest checkpoints beyond its keep deleted.
func (l *Local) checkpoint(ss *metadata.Session, state map[string]*checkpointState, key string, now time.Time) error {
	st := state[key]
	if st != nil && now.Before(st.next) {
		return nil
	}
	sum, err := l.treeSum(ss)
	if err != nil {
		return err
	}
	if st == nil {
		state[key] = &checkpointState{sum: sum, next: now.Add(ss.CheckpointEvery)}
		return nil
	}
	st.next = now.Add(ss.CheckpointEvery)
	if sum == st.sum {
		return nil
	}
	st.sum = sum
	name := checkpointName(ss.ID, now)
	if _, err := l.CreateSnapshot(context.Background(), SnapshotCreateRequest{User: ss.User, Session: ss.ID, Name: name}); err != nil {
		return err
	}
	l.log.Info("session checkpoint", "user", ss.User, "session", ss.ID, "snapshot", name)
	return l.pruneCheckpoints(ss)
}

// treeSum is a fingerprint of a session's scratch tree: every entry's
// path, inode, mode, size, mtime and link target.
func (l *Local) treeSum(ss *metadata.Session) (string, error) {
	root, err := l.st.Meta.GetInode(ss.Root)
	if err != nil {
		return "", asError(err, "session root")
	}
	tree, err := l.walkTree(root)
	if err != nil {
		return "", asError(err, "walk session "+ss.ID)
	}
	h := sha256.New()
	for _, w := range tree {
		h.Write([]byte(w.rel + "\x00" + w.n.Target + "\x00"))
		var b [32]byte
		binary.BigEndian.PutUint64(b[0:], w.n.Ino)
		binary.BigEndian.PutUint64(b[8:], uint64(w.n.Mode))
		binary.BigEndian.PutUint64(b[16:], w.n.Size)
		binary.BigEndian.PutUint64(b[24:], uint64(w.n.Mtime.UnixNano()))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkpointName names a checkpoint of session id taken at t: auto-ID-
// and the time in base 36, ordered by time.
func checkpointName(id string, t time.Time) string {
	return checkpointsOfSession(id) + strconv.FormatInt(t.UnixMilli(), 36)
}

// checkpointsOfSession is what the names of session id's checkpoints
// start with.
func checkpointsOfSession(id string) string {
	prefix := checkpointPrefix + id
	if len(prefix) > 48 {
		sum := sha256.Sum256([]byte(id))
		prefix = checkpointPrefix + hex.EncodeToString(sum[:8])
	}
	return prefix + "-"
}

// pruneCheckpoints deletes the oldest automatic checkpoints of ss beyond
// its keep.
func (l *Local) pruneCheckpoints(ss *metadata.Session) error {
	return l.dropCheckpoints(ss, ss.CheckpointKeep)
}

// dropCheckpoints deletes the oldest automatic checkpoints of ss until
// keep are left.
func (l *Local) dropCheckpoints(ss *metadata.Session, keep int) error {
	all, err := l.st.Meta.ListSnapshots(ss.User)
	if err != nil {
		return asError(err, "list snapshots")
	}
	prefix := checkpointsOfSession(ss.ID)
	var auto []metadata.Snapshot
	for _, sn := range all {
		if sn.Session == ss.ID && strings.HasPrefix(sn.Name, prefix) {
			auto = append(auto, sn)
		}
	}
	slices.SortFunc(auto, func(a, b metadata.Snapshot) int { return a.Created.Compare(b.Created) })
	for len(auto) > keep {
		if err := l.deleteSnapshot(auto[0]); err != nil {
			return err
		}
		auto = auto[1:]
	}
	return nil
}
