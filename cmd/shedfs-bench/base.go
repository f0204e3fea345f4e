package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// shedfsBinOf is the shedfs binary target name runs: -shedfs-base for
// "shedfs-base" and "shedfs-etcd-base", so that two builds are compared in
// the same run on the same noisy machine, else -shedfs.
func (b *bench) shedfsBinOf(name string) string {
	if name == "shedfs-base" || name == "shedfs-etcd-base" {
		return b.cfg.shedfsBase
	}
	return b.cfg.shedfsBin
}

// initStore creates a store with `bin init args...` (no other shedfs
// command creates one). A build from before that command (an older
// -shedfs-base) creates its store on first use and does not know init:
// its "No help topic" answer is not an error.
func initStore(ctx context.Context, bin string, args ...string) error {
	out, err := exec.CommandContext(ctx, bin, append([]string{"init"}, args...)...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No help topic for 'init'") {
		return fmt.Errorf("shedfs init %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
