package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/web"
)

func migrateCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "from", Usage: "store directory whose metadata to copy (no daemon may serve it)", Required: true},
		&cli.StringFlag{Name: "to", Usage: "etcd://host:2379[,host:2379...]/prefix, an empty prefix", Required: true},
	}
	// The TLS flags and the timeout of --meta, not --meta itself.
	for _, f := range metaFlags() {
		if slices.Contains([]string{"etcd-cacert", "etcd-cert", "etcd-key", "meta-timeout"}, f.Names()[0]) {
			flags = append(flags, f)
		}
	}
	return &cli.Command{
		Name:  "migrate",
		Usage: "copy a store's metadata to etcd; its blobs stay where they are and are served with --blobs",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if err := nargs(c, "no arguments", 0); err != nil {
				return err
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
