package main

import (
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestREADMEFlagReference keeps README.md's flag reference equal to what
// the command definitions render: a flag added, renamed or given a new
// default or usage without regenerating the block fails here.
func TestREADMEFlagReference(t *testing.T) {
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got := flagBlock(string(doc))
	if got == "" {
		t.Fatalf("README.md has no flag reference block (%s ... %s): run make docs after putting the markers back", flagsBegin, flagsEnd)
	}
	want := flagReference(newApp(nil, nil))
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		g, w := "(end of block)", "(end of block)"
		if line < len(gl) {
			g = gl[line]
		}
		if line < len(wl) {
			w = wl[line]
		}
		t.Fatalf("README.md's flag reference is out of date: run make docs (and commit README.md).\nfirst difference, line %d of the block:\n README: %s\n    CLI: %s", line+1, g, w)
	}
}

// TestFlagReferenceEveryFlag checks that the reference names every
// visible flag of every visible command, shared groups included, so that
// grouping never hides one.
func TestFlagReferenceEveryFlag(t *testing.T) {
	app := newApp(nil, nil)
	ref := flagReference(app)
	for _, c := range allCommands(app.Commands) {
		if c.Hidden {
			continue
		}
		for _, f := range c.Flags {
			if v, ok := f.(interface{ IsVisible() bool }); ok && !v.IsVisible() {
				continue
			}
			if !strings.Contains(ref, "`--"+f.Names()[0]+"`") {
				t.Errorf("%s: --%s is missing from the flag reference", c.Name, f.Names()[0])
			}
		}
		if !strings.Contains(ref, c.Usage) {
			t.Errorf("%s: its usage is missing from the flag reference", c.Name)
		}
	}
	if strings.Contains(ref, "help-markdown") {
		t.Error("the hidden help-markdown command is in the reference")
	}
}

// TestReplaceFlagBlock: make docs rewrites only what lies between the
// markers, and refuses a file without them.
func TestReplaceFlagBlock(t *testing.T) {
	doc := "a\n" + flagsBegin + "\nold\n" + flagsEnd + "\nb\n"
	got, err := replaceFlagBlock(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n" + flagsBegin + "\nnew\n" + flagsEnd + "\nb\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if flagBlock(got) != "new\n" {
		t.Fatalf("flagBlock = %q", flagBlock(got))
	}
	if _, err := replaceFlagBlock("no markers", "x"); err == nil {
		t.Fatal("no error for a file without markers")
	}
}

// allCommands is every leaf command, depth first.
func allCommands(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if len(c.Subcommands) > 0 {
			if !c.Hidden {
				out = append(out, allCommands(c.Subcommands)...)
			}
			continue
		}
		out = append(out, c)
	}
	return out
}
