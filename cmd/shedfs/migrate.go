package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/objstore"
	"github.com/shedfs/shedfs/web"
)

func migrateCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "from", Usage: "store directory whose metadata to copy (no daemon may serve it)", Required: true},
		&cli.StringFlag{Name: "to", Usage: "copy the metadata to etcd://host:2379[,host:2379...]/prefix, an empty prefix"},
		&cli.StringFlag{Name: "blobs-to", Usage: "copy the file contents to a bucket, s3://BUCKET/PREFIX?endpoint=URL&region=R, and serve them from there from now on"},
	}
	// The TLS flags and the timeout of --meta, not --meta itself.
	for _, f := range metaFlags() {
		if slices.Contains([]string{"etcd-cacert", "etcd-cert", "etcd-key", "meta-timeout"}, f.Names()[0]) {
			flags = append(flags, f)
		}
	}
	return &cli.Command{
		Name:  "migrate",
		Usage: "copy a store's metadata to etcd (--to), or its file contents to a bucket (--blobs-to)",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if err := nargs(c, "no arguments", 0); err != nil {
				return err
			}
			if (c.String("to") == "") == (c.String("blobs-to") == "") {
				return cli.Exit("migrate: give --to etcd://... or --blobs-to s3://..., one of them", 2)
			}
			if c.String("blobs-to") != "" {
				return migrateBlobs(c)
			}
			cfg, err := metadata.ParseMetaURL(c.String("to"))
			if err != nil {
				return err
			}
			cfg.Timeout = c.Duration("meta-timeout")
			if cfg.TLS, err = etcdTLS(c); err != nil {
				return err
			}
			log, err := quietLogger(c)
			if err != nil {
				return err
			}
			from := c.String("from")
			// A store on etcd keeps its link key beside its blobs
			// (daemon.Location.StateDir): carried first, so that the
			// links made before work there, and a different key already
			// there stops the migration before anything is copied.
			if err := web.CopyKey(from, filepath.Join(from, "blobs")); err != nil {
				return err
			}
			st, err := metadata.MigrateToEtcd(filepath.Join(from, "meta"), cfg, log)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "migrated %d records (%.1f MiB) from %s to %s\n", st.Records, float64(st.Bytes)/(1<<20), from, c.String("to"))
			fmt.Fprintf(c.App.Writer, "serve it with: --meta %s --blobs %s\n", c.String("to"), filepath.Join(from, "blobs"))
			return nil
		},
	}
}

// migrateBlobs copies the blobs of the embedded store --from to the
// bucket --blobs-to (blobs.Migrate) and records the bucket in the store,
// which from then on opens only with --blobs set to it. The store is held
// open meanwhile, so that no daemon serves it; a run cut short continues
// where it stopped.
func migrateBlobs(c *cli.Context) error {
	url, from := c.String("blobs-to"), c.String("from")
	if !strings.HasPrefix(url, "s3://") {
		return cli.Exit("migrate: --blobs-to takes s3://BUCKET/PREFIX?endpoint=URL&region=R", 2)
	}
	log, err := quietLogger(c)
	if err != nil {
		return err
	}
	loc := daemon.Location{Dir: from}
	st, err := daemon.Open(loc, daemon.OpenOptions{Logger: log})
	if errors.Is(err, metadata.ErrLocked) {
		if pid, perr := daemon.PeerPID(loc.SocketPath()); perr == nil {
			return cli.Exit(fmt.Sprintf("migrate: store %s is served by the shedfs daemon with pid %d: stop it (kill -TERM %d), then migrate", from, pid, pid), 1)
		}
		return cli.Exit(fmt.Sprintf("migrate: store %s is in use by another shedfs process: migrate when it is done", from), 1)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := objstore.Open(ctx, url, objstore.Options{Metrics: objstore.NewMetrics()})
	if err != nil {
		return fmt.Errorf("migrate: %s: %w", url, err)
	}
	ms, err := blobs.Migrate(ctx, st.Blobs, b, 0, func(ms blobs.MigrateStats) {
		log.Debug("migrate", "uploaded", ms.Uploaded, "blobs", ms.Blobs, "bytes", ms.Bytes)
	})
	if err != nil {
		return fmt.Errorf("%w (run the same command again to continue)", err)
	}
	if err := st.Meta.SetBlobBucket(url); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "migrated %d blobs to %s (%d uploaded now, %.1f MiB; the others were there already)\n", ms.Blobs, url, ms.Uploaded, float64(ms.Bytes)/(1<<20))
	fmt.Fprintf(c.App.Writer, "serve it with: --store %s --blobs '%s' (%s is its cache from now on)\n", from, url, filepath.Join(from, "blobs"))
	return nil
}
