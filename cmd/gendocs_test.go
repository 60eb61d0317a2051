package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

const cliReference = "../docs/cli-reference.md"

// TestCLIReferenceUpToDate fails when docs/cli-reference.md is not what
// the command tree generates: a command, flag or help text changed and
// `make docs` was not run.
func TestCLIReferenceUpToDate(t *testing.T) {
	var got bytes.Buffer
	if err := writeMarkdownReference(NewRootCommand(&bytes.Buffer{}), &got); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(cliReference)
	if err != nil {
		t.Fatalf("%v: run make docs", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		var g, w string
		if line < len(gl) {
			g = gl[line]
		}
		if line < len(wl) {
			w = wl[line]
		}
		t.Fatalf("docs/cli-reference.md is stale: run make docs (first difference at line %d:\n  file:      %q\n  generated: %q)", line+1, w, g)
	}
}

// TestCLIReferenceCoversEveryCommand checks the generator itself: every
// visible command has its section, no hidden one does, and every link
// points at a section of the file.
func TestCLIReferenceCoversEveryCommand(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{})
	var b bytes.Buffer
	if err := writeMarkdownReference(root, &b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	anchors := map[string]bool{}
	for _, l := range strings.Split(doc, "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			anchors["#"+strings.ReplaceAll(h, " ", "-")] = true
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		section := "## " + c.CommandPath() + "\n"
		if c.Hidden || c.Name() == "help" {
			if strings.Contains(doc, section) {
				t.Errorf("hidden command %q is in the reference", c.CommandPath())
			}
			return
		}
		if !strings.Contains(doc, section) {
			t.Errorf("command %q has no section in the reference", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	for _, want := range []string{"## ovnbgp version\n", "## ovnbgp routes advertised\n", "## ovnbgp completion bash\n"} {
		if !strings.Contains(doc, want) {
			t.Errorf("reference lacks %q", strings.TrimSpace(want))
		}
	}
	for _, l := range strings.Split(doc, "\n") {
		for _, part := range strings.Split(l, "](")[1:] {
			link := part[:strings.IndexByte(part, ')')]
			if strings.HasPrefix(link, "#") && !anchors[link] {
				t.Errorf("link %q points at no section", link)
			}
			if !strings.HasPrefix(link, "#") {
				if _, err := os.Stat(filepath.Join("../docs", link)); err != nil {
					t.Errorf("link %q: %v", link, err)
				}
			}
		}
	}
}
