package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

// initCommand creates a store. It is one of the three ways to create one
// (with serve and mount --init): every other command refuses a location
// that holds no store, so that a mistyped --store is an error rather than
// a new, empty store.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create a store (meta/ and blobs/ in --store DIR, or on etcd with --meta and --blobs); an existing store is left as it is",
		Flags: []cli.Flag{storeFlag()},
		Action: func(c *cli.Context) error {
			if err := nargs(c, "no arguments", 0); err != nil {
				return err
			}
			loc, err := location(c)
			if err != nil {
				return err
			}
			if cl, err := daemon.DialSocket(loc.SocketPath()); err == nil {
				cl.Close()
				fmt.Fprintf(c.App.Writer, "store %s exists already (a daemon serves it)\n", loc)
				return nil
			} else if !errors.Is(err, daemon.ErrNoDaemon) {
				return err
			}
			log, err := quietLogger(c)
			if err != nil {
				return err
			}
			st, err := daemon.Open(loc, daemon.OpenOptions{Create: true, Logger: log})
			if err != nil {
				return err
			}
			created := st.Created
			if err := st.Close(); err != nil {
				return err
			}
			if created {
				fmt.Fprintf(c.App.Writer, "store %s created\n", loc)
			} else {
				fmt.Fprintf(c.App.Writer, "store %s exists already; left as it is\n", loc)
			}
			return nil
		},
	}
}

// initFlag is serve's and mount's --init: create the store when the
// location holds none, as shedfs init would.
func initFlag() cli.Flag {
	return &cli.BoolFlag{Name: "init", Usage: "create the store first if --store (or --meta) holds none, as shedfs init does"}
}
