package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

// quotaDefaultsCommand is `shedfs quota defaults`: the quota new users and
// groups start with and the max file size, settings of the store. Without
// flags it shows them; with flags it changes those given.
func quotaDefaultsCommand() *cli.Command {
	return &cli.Command{
		Name:  "defaults",
		Usage: "show or set the quota of new users and groups and the max file size (0 or none: unlimited)",
		Description: "Without flags, shows the settings. With flags, changes the ones given and keeps the others;\n" +
			"existing users and groups keep their limits, a new max file size holds for every write at once.",
		Flags: []cli.Flag{
			storeFlag(),
			jsonFlag(),
			&cli.StringFlag{Name: "user-bytes", Usage: "byte limit of a new user, e.g. 10GiB, none"},
			&cli.StringFlag{Name: "user-inodes", Usage: "inode limit of a new user, e.g. 100000, none"},
			&cli.StringFlag{Name: "group-bytes", Usage: "byte limit of a new group, e.g. 50GiB, none"},
			&cli.StringFlag{Name: "group-inodes", Usage: "inode limit of a new group, e.g. 500000, none"},
			&cli.StringFlag{Name: "max-file-size", Usage: "largest size of any file, e.g. 5GiB, none"},
		},
		Action: runQuotaDefaults,
	}
}

func runQuotaDefaults(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	var req daemon.SettingsSetRequest
	for _, f := range []struct {
		name  string
		count bool
		dst   **int64
	}{
		{"user-bytes", false, &req.UserBytes},
		{"user-inodes", true, &req.UserInodes},
		{"group-bytes", false, &req.GroupBytes},
		{"group-inodes", true, &req.GroupInodes},
		{"max-file-size", false, &req.MaxFileSize},
	} {
		parse := parseSizeFlag
		if f.count {
			parse = parseCountFlag
		}
		v, ok, err := parse(c, f.name)
		if err != nil {
			return err
		}
		if ok {
			*f.dst = &v
		}
	}
	set := req != (daemon.SettingsSetRequest{})
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		var (
			st  *daemon.Settings
			err error
		)
		if set {
			st, err = a.SetSettings(ctx, req)
		} else {
			st, err = a.GetSettings(ctx)
		}
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, st)
		}
		return settingsTable(c.App.Writer, st)
	})
}

// settingsTable prints the settings, "none" where unlimited.
func settingsTable(w io.Writer, st *daemon.Settings) error {
	tw := table(w)
	fmt.Fprintln(tw, "SETTING\tBYTES\tINODES")
	fmt.Fprintf(tw, "new user\t%s\t%s\n", sizeOrNone(st.DefaultUserLimit.Bytes), countOrNone(st.DefaultUserLimit.Inodes))
	fmt.Fprintf(tw, "new group\t%s\t%s\n", sizeOrNone(st.DefaultGroupLimit.Bytes), countOrNone(st.DefaultGroupLimit.Inodes))
	fmt.Fprintf(tw, "max file size\t%s\t-\n", sizeOrNone(st.MaxFileSize))
	return tw.Flush()
}
