package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// shedfsEtcdTarget is the "shedfs" target with its metadata on etcd: a
// 3-member cluster of Debian's etcd-server started for the target (all
// members on this machine, so every commit waits for two fsyncs on its
// disk), the same quota and flags, blobs in a directory of their own.
func shedfsEtcdTarget(extra []string) func(context.Context, *bench, string) (*mounted, error) {
	return func(ctx context.Context, b *bench, name string) (*mounted, error) {
		c, err := etcdtest.StartShared(3)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		meta := []string{
			"--meta", "etcd://" + strings.Join(c.Endpoints(), ",") + "/bench",
			"--blobs", filepath.Join(b.work, name+"-blobs"),
		}
		if err := initStore(ctx, b.shedfsBinOf(name), meta...); err != nil {
			c.Stop()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		add := append([]string{"user", "add", "bench", "--quota", strconv.FormatInt(quotaBytes, 10), "--inodes", strconv.Itoa(quotaInodes)}, meta...)
		if out, err := exec.CommandContext(ctx, b.shedfsBinOf(name), add...).CombinedOutput(); err != nil {
			c.Stop()
			return nil, fmt.Errorf("%s: add user bench: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		mnt := filepath.Join(b.work, name+"-mnt")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			c.Stop()
			return nil, fmt.Errorf("%s dirs: %w", name, err)
		}
		args := append(append([]string{"mount", "--user", "bench"}, meta...), extra...)
		m, err := startFUSEChild(ctx, b, name, mnt, b.shedfsBinOf(name), append(args, mnt)...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		m.after = c.Stop
		return m, nil
	}
}
