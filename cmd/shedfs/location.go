package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
)

// metaFlags are the flags that place a store's metadata on etcd instead
// of in the store directory. addMetaFlags gives them to every command
// that has --store, so a new command gets them by taking storeFlag.
func metaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "meta", EnvVars: []string{"SHEDFS_META"},
			Usage: "metadata on etcd instead of --store: etcd://host:2379[,host:2379...]/prefix"},
		&cli.StringFlag{Name: "blobs", EnvVars: []string{"SHEDFS_BLOBS"},
			Usage: "blob directory (with --meta: shared by every host; default STORE/blobs), or a bucket: s3://BUCKET/PREFIX?endpoint=URL&region=R"},
		&cli.StringFlag{Name: "cache", Usage: "with --blobs s3://...: this host's cache of the bucket (default STORE/blobs)"},
		&cli.StringFlag{Name: "cache-size", Value: "10GiB", Usage: "with --blobs s3://...: how much the cache keeps; changes not uploaded yet are never evicted"},
		&cli.DurationFlag{Name: "blob-timeout", Value: daemon.DefaultBlobTimeout,
			Usage: "with --blobs s3://...: how long a read or a write waits for the bucket before failing with EIO"},
		&cli.StringFlag{Name: "admin-socket", Usage: "admin socket path (default STORE/admin.sock; with --meta none unless given)"},
		&cli.StringFlag{Name: "etcd-cacert", Usage: "CA certificate that signed the etcd members' (TLS)"},
		&cli.StringFlag{Name: "etcd-cert", Usage: "client certificate for etcd (TLS)"},
		&cli.StringFlag{Name: "etcd-key", Usage: "key of --etcd-cert"},
		&cli.DurationFlag{Name: "meta-timeout", Value: metadata.DefaultMetaTimeout,
			Usage: "how long a metadata request may wait for etcd before failing with EIO"},
	}
}

// addMetaFlags appends metaFlags to every command with a --store flag.
func addMetaFlags(cmds []*cli.Command) {
	for _, c := range cmds {
		for _, f := range c.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "store" && sf.Hidden {
				break // demo: its store is DIR/store, never on etcd
			}
			if f.Names()[0] == "store" {
				c.Flags = append(c.Flags, metaFlags()...)
				break
			}
		}
		addMetaFlags(c.Subcommands)
	}
}

// location reads where the store of a command lives from its flags.
// Credentials for etcd come from SHEDFS_ETCD_USER and
// SHEDFS_ETCD_PASSWORD, never from the command line (where ps shows
// them).
func location(c *cli.Context) (daemon.Location, error) {
	loc := daemon.Location{
		Dir:    c.String("store"),
		Meta:   c.String("meta"),
		Blobs:  c.String("blobs"),
		Socket: c.String("admin-socket"),
	}
	if strings.HasPrefix(loc.Blobs, "s3://") {
		size, err := daemon.ParseSize(c.String("cache-size"))
		if err != nil {
			return loc, fmt.Errorf("--cache-size: %w", err)
		}
		loc.Bucket, loc.Blobs = loc.Blobs, ""
		loc.Cache = daemon.Cache{Dir: c.String("cache"), Size: size, Timeout: c.Duration("blob-timeout")}
	}
	if loc.Meta != "" {
		cfg, err := metadata.ParseMetaURL(loc.Meta)
		if err != nil {
			return loc, err
		}
		cfg.Timeout = c.Duration("meta-timeout")
		cfg.Username, cfg.Password = os.Getenv("SHEDFS_ETCD_USER"), os.Getenv("SHEDFS_ETCD_PASSWORD")
		if cfg.TLS, err = etcdTLS(c); err != nil {
			return loc, err
		}
		loc.Etcd = cfg
	}
	return loc, loc.Check()
}

// etcdTLS builds the TLS configuration of --etcd-cacert/--etcd-cert/--etcd-key;
// nil when none is given.
func etcdTLS(c *cli.Context) (*tls.Config, error) {
	ca, cert, key := c.String("etcd-cacert"), c.String("etcd-cert"), c.String("etcd-key")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("--etcd-cert and --etcd-key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
