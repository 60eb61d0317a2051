package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

func checkOutput(f string) error {
	switch f {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: unknown output format (use table, json or yaml)", f)
}

// render writes v as JSON or YAML, or calls table for the table format.
// YAML is the JSON form re-encoded, so both have the same keys and order.
func render(w io.Writer, format string, v any, table func(*tabwriter.Writer)) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var n yaml.Node
		if err := yaml.Unmarshal(b, &n); err != nil {
			return err
		}
		blockStyle(&n)
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(&n); err != nil {
			return err
		}
		return enc.Close()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// blockStyle turns JSON's flow style and quotes into YAML's block style;
// the encoder quotes again where a plain scalar would change type.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// row writes tab-separated cells, each made safe for a terminal by cell.
func row(w io.Writer, cells ...any) {
	var b bytes.Buffer
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(cell(fmt.Sprint(c)))
	}
	b.WriteByte('\n')
	_, _ = w.Write(b.Bytes())
}

// cell returns s as it may be printed in a table. Names come from OVN NB
// rows and peers, which anyone with NB write access controls: a newline,
// tab, escape sequence or bidi override printed raw would forge rows or
// rewrite the terminal. A string with any rune that is not printable (or
// not valid UTF-8) is shown Go-quoted ("a\nb", "\x1b[31m"), so the
// escaping is visible; other strings are unchanged.
func cell(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// ago renders a time as a short duration before now ("-" for zero).
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
