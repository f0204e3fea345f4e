package metadata

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// On a store many daemons share, each daemon's lock table holds only its
// own locks; the store holds everyone's (locks.go). `shedfs status` asks
// one daemon, and an operator looking for who blocks a file needs all of
// them, with the daemon (host and pid) that holds each: PeerLocks.

// PeerLock is a lock another daemon sharing the store holds.
type PeerLock struct {
	Ino uint64
	// Daemon names the holder as it registered: "HOST pid PID".
	Daemon string
	LockRecord
}

// DaemonName names this process among the daemons sharing a store, as
// PeerLock.Daemon names the others.
func (s *Store) DaemonName() string { return daemonHost() }

// PeerLocks lists the locks the other daemons sharing the store hold, by
// inode; none on a store no other daemon shares.
func (s *Store) PeerLocks() ([]PeerLock, error) {
	e := s.lockEngine()
	if e == nil {
		return nil, nil
	}
	ctx, cancel := e.ctx()
	defer cancel()
	root := etcdLockRoot(string(e.prefix))
	daemons := etcdDaemonPrefix(string(e.prefix))
	resp, err := e.cli.Txn(ctx).Then(
		clientv3.OpGet(root, clientv3.WithPrefix()),
		clientv3.OpGet(daemons, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("list the locks of the daemons: %w", etcdErr(err))
	}
	names := make(map[string]string)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		names[strings.TrimPrefix(string(kv.Key), daemons)] = registeredHost(string(kv.Value))
	}
	var out []PeerLock
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		k := string(kv.Key)
		id := k[strings.LastIndexByte(k, '/')+1:]
		ino := lockIno(k, root)
		if id == e.id || ino == 0 {
			continue
		}
		var recs []LockRecord
		if err := json.Unmarshal(kv.Value, &recs); err != nil {
			return nil, fmt.Errorf("lock record %s: %w", k, ErrCorrupt)
		}
		name := names[id]
		if name == "" {
			name = "daemon " + id // its registration went a moment before its locks
		}
		for _, r := range recs {
			out = append(out, PeerLock{Ino: ino, Daemon: name, LockRecord: r})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Ino < out[j].Ino })
	return out, nil
}

// registeredHost is the "HOST pid PID" of a daemon's registration value
// (register, renewLease: that, then " since TIME" or " renewed TIME").
func registeredHost(v string) string {
	for _, sep := range []string{" since ", " renewed "} {
		if i := strings.LastIndex(v, sep); i >= 0 {
			return v[:i]
		}
	}
	return v
}
