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

// TestGendocsCommand runs the hidden `ovnbgp gendocs`: it refuses to run
// with nothing to do, writes the same reference as the test above
// compares, and a man page per visible command.
func TestGendocsCommand(t *testing.T) {
	if _, err := run(t, "gendocs"); err == nil || !strings.Contains(err.Error(), "nothing to generate") {
		t.Errorf("gendocs without flags: %v, want 'nothing to generate'", err)
	}
	dir := t.TempDir()
	md, man := filepath.Join(dir, "ref.md"), filepath.Join(dir, "man")
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200") // 2025-12-01
	if _, err := run(t, "gendocs", "--markdown", md, "--man", man); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := writeMarkdownReference(NewRootCommand(&bytes.Buffer{}), &want); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(md); err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Errorf("gendocs --markdown wrote something else than writeMarkdownReference (%v)", err)
	}
	page, err := os.ReadFile(filepath.Join(man, "ovnbgp-routes-learned.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`.TH "OVNBGP" "1" "Dec 2025"`, "ovnbgp-routes-learned", "--rejected"} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("ovnbgp-routes-learned.1 lacks %q:\n%s", s, page)
		}
	}
	if _, err := os.Stat(filepath.Join(man, "ovnbgp-gendocs.1")); err == nil {
		t.Error("the hidden gendocs command got a man page")
	}
}
