package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
)

// A config file for serve, so that a unit file or a ConfigMap does not
// carry a twenty-flag command line: TOML whose keys are serve's flag names
// (and the global log-level and log-format), each value of the flag's
// type. A flag given on the command line (or through its environment
// variable) wins over the file; a key that names no flag is an error, so
// a misspelt setting never goes silently unapplied.

// configFlags are serve's --config and --print-config.
func configFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "read serve's settings from this TOML file (keys: the flag names, e.g. mount-root = \"/run/shedfs\"; the command line wins)"},
		&cli.BoolFlag{Name: "print-config", Usage: "print the effective configuration (file, flags and defaults) as TOML and exit"},
	}
}

// configGlobals are the app's flags a config file may set as well.
var configGlobals = []string{"log-level", "log-format"}

// notConfigurable are the flags of the command that a config file does
// not set: itself and what only makes sense on a command line.
var notConfigurable = map[string]bool{"config": true, "print-config": true, "help": true}

// configurable lists the flags a config file of c's command may set, in
// the order print-config shows them: the globals first, then the
// command's own.
func configurable(c *cli.Context) []cli.Flag {
	var out []cli.Flag
	for _, name := range configGlobals {
		for _, f := range c.App.Flags {
			if f.Names()[0] == name {
				out = append(out, f)
			}
		}
	}
	for _, f := range c.Command.Flags {
		if !notConfigurable[f.Names()[0]] {
			out = append(out, f)
		}
	}
	return out
}

// applyConfig reads the file --config names, if any, and sets every flag
// it names that the command line left unset. It runs before the command's
// action, so that a required flag the file sets counts as set.
func applyConfig(c *cli.Context) error {
	path := c.String("config")
	if path == "" {
		return nil
	}
	var raw map[string]any
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	flags := map[string]cli.Flag{}
	for _, f := range configurable(c) {
		flags[f.Names()[0]] = f
	}
	// In the file's key order would be nicer, but a map has none; the
	// first error in name order is as good and stable.
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f, ok := flags[k]
		if !ok {
			return fmt.Errorf("config %s: unknown key %q (the keys are serve's flag names, see shedfs serve --help)", path, k)
		}
		vals, err := configValues(f, raw[k])
		if err != nil {
			return fmt.Errorf("config %s: key %q: %w", path, k, err)
		}
		if c.IsSet(k) {
			continue // the command line wins
		}
		for _, v := range vals {
			if err := c.Set(k, v); err != nil {
				return fmt.Errorf("config %s: key %q: %w", path, k, err)
			}
		}
	}
	return nil
}

// configValues turns the TOML value v of flag f into what the flag would
// read on a command line (a list for a repeatable flag), refusing a value
// of the wrong type.
func configValues(f cli.Flag, v any) ([]string, error) {
	switch f.(type) {
	case *cli.BoolFlag:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false, not %s", tomlType(v))
		}
		return []string{strconv.FormatBool(b)}, nil
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("want an integer, not %s", tomlType(v))
		}
		return []string{strconv.FormatInt(n, 10)}, nil
	case *cli.DurationFlag:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a duration as a string such as \"30s\", not %s", tomlType(v))
		}
		if _, err := time.ParseDuration(s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	case *cli.StringSliceFlag:
		switch v := v.(type) {
		case string:
			return []string{v}, nil
		case []any:
			out := make([]string, 0, len(v))
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("want a list of strings, found %s in it", tomlType(e))
				}
				out = append(out, s)
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a string or a list of strings, not %s", tomlType(v))
	case *cli.StringFlag:
		switch v := v.(type) {
		case string:
			return []string{v}, nil
		case int64:
			// memory-limit = 0, scan-max-size = 1048576: sizes read as
			// numbers too.
			return []string{strconv.FormatInt(v, 10)}, nil
		}
		return nil, fmt.Errorf("want a string, not %s", tomlType(v))
	}
	return nil, errors.New("this flag cannot be set from a config file")
}

// tomlType names the TOML type of a decoded value, for errors.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date or time"
	}
	return fmt.Sprintf("%T", v)
}

// printConfig writes the effective configuration of c's command as TOML,
// each setting under its usage as a comment: what a config file with
// exactly these lines would configure. A string flag that is unset and
// empty is shown commented out, so that the output read back as a config
// file leaves it unset too.
func printConfig(c *cli.Context, w io.Writer) error {
	fmt.Fprintf(w, "# shedfs %s: effective configuration (shedfs serve --print-config)\n", c.Command.Name)
	for _, f := range configurable(c) {
		name := f.Names()[0]
		var v any
		switch f.(type) {
		case *cli.DurationFlag:
			v = c.Duration(name).String()
		case *cli.StringSliceFlag:
			v = c.StringSlice(name)
		case *cli.BoolFlag:
			v = c.Bool(name)
		case *cli.IntFlag:
			v = c.Int(name)
		case *cli.Int64Flag:
			v = c.Int64(name)
		case *cli.UintFlag:
			v = c.Uint(name)
		case *cli.Uint64Flag:
			n := c.Uint64(name)
			if n > math.MaxInt64 {
				return fmt.Errorf("print-config: --%s %d does not fit TOML", name, n)
			}
			v = int64(n)
		case *cli.StringFlag:
			v = c.String(name)
		default:
			continue
		}
		line, err := toml.Marshal(map[string]any{name: v})
		if err != nil {
			return fmt.Errorf("print-config: --%s: %w", name, err)
		}
		fmt.Fprintf(w, "\n# %s\n", usageOf(f))
		if s, ok := v.(string); ok && s == "" && !c.IsSet(name) {
			fmt.Fprintf(w, "# %s", line)
			continue
		}
		if sl, ok := v.([]string); ok && len(sl) == 0 && !c.IsSet(name) {
			fmt.Fprintf(w, "# %s", line)
			continue
		}
		w.Write(line)
	}
	return nil
}

// usageOf is a flag's usage text on one line.
func usageOf(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return strings.ReplaceAll(d.GetUsage(), "\n", " ")
	}
	return ""
}
