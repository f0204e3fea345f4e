package blobs

import (
	"context"
	"strings"
	"time"

	"github.com/shedfs/shedfs/objstore"
)

// DefaultGrace is how old a chunk no manifest names must be before the
// collector deletes it, when RemoteOptions give no Grace.
const DefaultGrace = time.Hour

// Collect deletes the chunk objects that no manifest in the bucket and no
// blob of this cache names, once older than grace: the chunks of
// versions that were replaced or removed. The grace covers what no
// manifest names yet, or no longer: an upload between its chunks and its
// manifest, a moved blob whose manifest another host has still to write,
// and readers on other hosts still reading a version they opened before
// it was replaced. It returns how many it deleted.
func (r *Remote) Collect(ctx context.Context, grace time.Duration) (int, error) {
	named, err := r.namedChunks(ctx)
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-grace)
	var old []string
	err = r.b.List(ctx, chunkPrefix, func(i objstore.Info) error {
		if !named[i.Key] && i.ModTime.Before(cutoff) {
			old = append(old, i.Key)
		}
		return nil
	})
	if err != nil {
		return 0, errIO("list chunks", err)
	}
	deleted := 0
	for _, k := range old {
		if err := r.b.Delete(ctx, k); err != nil {
			return deleted, errIO("delete chunk "+k, err)
		}
		deleted++
	}
	return deleted, nil
}

// namedChunks is every chunk key a manifest in the bucket or a blob of
// this cache names.
func (r *Remote) namedChunks(ctx context.Context) (map[string]bool, error) {
	var keys []string
	err := r.b.List(ctx, manifestPrefix, func(i objstore.Info) error {
		if strings.HasPrefix(i.Key, manifestPrefix) {
			keys = append(keys, i.Key)
		}
		return nil
	})
	if err != nil {
		return nil, errIO("list manifests", err)
	}
	named := map[string]bool{}
	for _, k := range keys {
		m, err := r.getManifest(ctx, k)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue // deleted since the listing
		}
		for _, c := range m.Keys {
			named[c] = true
		}
	}
	r.mu.Lock()
	for _, e := range r.files {
		if e.base != nil {
			for _, c := range e.base.Keys {
				named[c] = true
			}
		}
	}
	r.mu.Unlock()
	return named, nil
}

// collector runs Collect every grace until Close.
func (r *Remote) collector(grace time.Duration) {
	t := time.NewTicker(grace)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		n, err := r.Collect(r.ctx, grace)
		if err != nil {
			r.log.Warn("blob cache: collect old chunks", "deleted", n, "err", err)
		} else if n > 0 {
			r.log.Info("blob cache: collected old chunks", "deleted", n)
		}
	}
}
