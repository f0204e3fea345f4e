package main

import (
	"io"
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

// TestDemoTakesServeFlags: the demo is serve with a store and views of its
// own, so every flag serve has (a new one too) works on demo, but for the
// mount root, which the demo sets; its doors listen on loopback.
func TestDemoTakesServeFlags(t *testing.T) {
	app := newApp(nil, nil)
	var serve, demo *cli.Command
	for _, c := range app.Commands {
		switch c.Name {
		case "serve":
			serve = c
		case "demo":
			demo = c
		}
	}
	has := map[string]cli.Flag{}
	for _, f := range demo.Flags {
		has[f.Names()[0]] = f
	}
	// The demo's store is its own directory: it takes no flag that places
	// a store elsewhere.
	placing := map[string]bool{}
	for _, f := range metaFlags() {
		placing[f.Names()[0]] = true
	}
	for _, f := range serve.Flags {
		n := f.Names()[0]
		if _, ok := has[n]; !ok && n != "mount-root" && !placing[n] {
			t.Errorf("serve's --%s is not a flag of demo", n)
		}
	}
	if _, ok := has["mount-root"]; ok {
		t.Error("demo takes --mount-root; its views go under DIR/mnt")
	}
	for name, want := range map[string]string{"metrics": demoMetrics, "http": demoHTTP} {
		if got := has[name].(*cli.StringFlag).Value; got != want || !strings.HasPrefix(got, "127.0.0.1:") {
			t.Errorf("demo --%s defaults to %q, want %q on loopback", name, got, want)
		}
	}
	var stderr strings.Builder
	if code := run([]string{"shedfs", "demo", "extra"}, io.Discard, &stderr); code == 0 || !strings.HasPrefix(stderr.String(), "shedfs: demo: takes no arguments") {
		t.Errorf("demo with an argument: exit %d, %q", code, stderr.String())
	}
}
