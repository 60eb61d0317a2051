package cmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGendocsCommand is the hidden `ovnbgp gendocs`: the CLI reference
// (docs/cli-reference.md, `make docs`) and the man pages of the packages
// (`make package`), generated from this command tree so they cannot drift
// from it.
func newGendocsCommand() *cobra.Command {
	var markdown, manDir string
	c := &cobra.Command{
		Use:    "gendocs [--markdown FILE] [--man DIR]",
		Short:  "Generate the CLI reference (Markdown) and man pages from the command tree",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown == "" && manDir == "" {
				return fmt.Errorf("nothing to generate: give --markdown FILE, --man DIR or both")
			}
			root := cmd.Root()
			if markdown != "" {
				var b bytes.Buffer
				if err := writeMarkdownReference(root, &b); err != nil {
					return err
				}
				if err := os.WriteFile(markdown, b.Bytes(), 0o644); err != nil {
					return fmt.Errorf("writing the CLI reference: %w", err)
				}
			}
			if manDir != "" {
				if err := writeManPages(root, manDir); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&markdown, "markdown", "", "write the CLI reference, one Markdown file, to FILE")
	c.Flags().StringVar(&manDir, "man", "", "write one man page (section 1) per command into DIR; the date is $SOURCE_DATE_EPOCH's, else today's")
	return c
}

// prepareDocs gives root the commands cobra adds only when it executes
// (completion) and turns off the "Auto generated ... on DATE" lines, so the
// output depends on the command tree alone.
func prepareDocs(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// writeMarkdownReference writes every visible command of root's tree as one
// Markdown document: a section per command, in cobra's order (depth first,
// sorted by name), with cobra's own rendering of its usage and flags and
// links between the sections.
func writeMarkdownReference(root *cobra.Command, w io.Writer) error {
	prepareDocs(root)
	fmt.Fprint(w, `# ovnbgp CLI reference

<!-- Generated from the command tree by `+"`make docs`"+` (ovnbgp gendocs --markdown). Do not edit:
     change the commands' help in cmd/ and run make docs; a test fails when this file is stale. -->

Every command, flag and default, generated from the binary's own command tree. For what the
commands show and how to use them, read the guide: [cli.md](cli.md).

`)
	// cobra names a command's page ovnbgp_routes_learned.md; here it is
	// the section "## ovnbgp routes learned", whose anchor is
	// #ovnbgp-routes-learned.
	link := func(page string) string {
		return "#" + strings.ReplaceAll(strings.TrimSuffix(page, ".md"), "_", "-")
	}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !c.IsAvailableCommand() && c != root || c.IsAdditionalHelpTopicCommand() {
			return nil
		}
		if err := doc.GenMarkdownCustom(c, w, link); err != nil {
			return fmt.Errorf("%s: %w", c.CommandPath(), err)
		}
		fmt.Fprintln(w)
		for _, s := range c.Commands() {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root)
}

// writeManPages writes ovnbgp.1, ovnbgp-peers.1, ... into dir.
func writeManPages(root *cobra.Command, dir string) error {
	prepareDocs(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	header := &doc.GenManHeader{Title: "OVNBGP", Section: "1", Source: "ovnbgp " + readVersion().Version, Manual: "ovnbgp manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("man pages in %s: %w", filepath.Clean(dir), err)
	}
	return nil
}
