package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// quotaBytes and quotaInodes are the limits of the "shedfs+quota" target:
// far above what any workload writes, so that quotas are checked on every
// write and create but never bite. The target costs what admission and
// usage accounting cost, against "shedfs" with no limits.
const (
	quotaBytes  = 1 << 40
	quotaInodes = 1000000000
)

// shedfsQuotaTarget is shedfsTarget with user bench created beforehand, on
// the target's own store, with a byte and an inode limit.
func shedfsQuotaTarget(extra []string) func(context.Context, *bench, string) (*mounted, error) {
	start := shedfsTarget(extra)
	return func(ctx context.Context, b *bench, name string) (*mounted, error) {
		store := filepath.Join(b.work, name+"-store")
		if err := initStore(ctx, b.shedfsBinOf(name), "--store", store); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cmd := exec.CommandContext(ctx, b.shedfsBinOf(name), "user", "add", "bench",
			"--store", store, "--quota", strconv.FormatInt(quotaBytes, 10), "--inodes", strconv.Itoa(quotaInodes))
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: set the quota of user bench: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		return start(ctx, b, name)
	}
}
