package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "copy files into a user's uploads/ (read and delete only in the view)",
		ArgsUsage: "FILE...",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "user", Usage: "the user whose uploads/ receives the files", Required: true},
			&cli.StringFlag{Name: "session", Usage: "put the files in uploads/SESSION/, created if needed"},
			&cli.BoolFlag{Name: "replace", Usage: "replace files of the same name (atomically) instead of refusing"},
			jsonFlag(),
		},
		Action: runImport,
	}
}

// importFile is one file named on the command line, checked before
// anything is copied.
type importFile struct {
	path string
	name string
	size int64
}

func runImport(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("import: give at least one FILE (see --help)")
	}
	user, session := c.String("user"), c.String("session")
	if err := daemon.ValidPrincipalName("user", user); err != nil {
		return err
	}
	files, err := importFiles(c.Args().Slice(), user, session)
	if err != nil {
		return err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		prog := newProgress(c.App.ErrWriter, len(files), total)
		var results []*daemon.ImportResult
		for i, f := range files {
			res, err := importOne(ctx, a, f, daemon.ImportRequest{
				User: user, Session: session, Name: f.name, Replace: c.Bool("replace"),
			}, prog, i)
			if err != nil {
				prog.clear()
				if len(results) > 0 {
					return fmt.Errorf("%w (after %d of %d files were imported)", err, len(results), len(files))
				}
				return err
			}
			results = append(results, res)
		}
		prog.clear()
		if c.Bool("json") {
			return printJSON(c.App.Writer, results)
		}
		where := "uploads/"
		if session != "" {
			where += session + "/"
		}
		what := "files"
		if len(results) == 1 {
			what = "file"
		}
		fmt.Fprintf(c.App.Writer, "imported %d %s (%s) into %s of %s\n", len(results), what, daemon.FormatSize(total), where, user)
		return nil
	})
}

// importFiles checks every file before the first is copied: it exists, is
// a regular file, its name is one a view can show, and no two share a
// name, so a bad argument never leaves half an import behind.
func importFiles(args []string, user, session string) ([]importFile, error) {
	seen := map[string]string{}
	out := make([]importFile, 0, len(args))
	for _, p := range args {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("import: %s is not a regular file (import copies files, not directories)", p)
		}
		name := filepath.Base(p)
		if err := daemon.CheckImport(daemon.ImportRequest{User: user, Session: session, Name: name}); err != nil {
			return nil, err
		}
		if prev, ok := seen[name]; ok {
			return nil, fmt.Errorf("import: %s and %s would both be named %s in uploads/", prev, p, name)
		}
		seen[name] = p
		out = append(out, importFile{path: p, name: name, size: fi.Size()})
	}
	return out, nil
}

// importOne copies one file, reporting progress.
func importOne(ctx context.Context, a daemon.Admin, f importFile, req daemon.ImportRequest, prog *progress, i int) (*daemon.ImportResult, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer fh.Close()
	prog.file(i, f.name)
	return a.Import(ctx, req, &countingReader{r: fh, p: prog}, f.size)
}

// countingReader reports bytes as they are read.
type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n))
	return n, err
}

// progress is the one line an import of many files keeps rewriting on a
// terminal; elsewhere it prints nothing.
type progress struct {
	w       io.Writer
	on      bool
	files   int
	total   int64
	done    int64
	index   int
	name    string
	last    time.Time
	written bool
}

func newProgress(w io.Writer, files int, total int64) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, on: ok && isTerminal(f), files: files, total: total}
}

func (p *progress) file(i int, name string) {
	p.index, p.name = i, name
	p.draw(true)
}

func (p *progress) add(n int64) {
	p.done += n
	p.draw(false)
}

// draw rewrites the line, at most ten times a second unless forced.
func (p *progress) draw(force bool) {
	if !p.on || (!force && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	name := p.name
	if len(name) > 40 {
		name = name[:37] + "..."
	}
	line := fmt.Sprintf("importing %d/%d %s  %s of %s", p.index+1, p.files, name,
		daemon.FormatSize(p.done), daemon.FormatSize(p.total))
	fmt.Fprintf(p.w, "\r%-79s", line)
	p.written = true
}

// clear removes the progress line, so that what follows starts clean.
func (p *progress) clear() {
	if p.on && p.written {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 79))
		p.written = false
	}
}
