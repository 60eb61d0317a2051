package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

const referenceFile = "../docs/config.md"

// docRow is a key documented in docs/config.md, with its default cell.
type docRow struct {
	path, def string
	line      int
}

// referenceRows reads the key tables of docs/config.md: under a heading
// "## `section`" or "### `list[]`", each row "| `key` | type | default |
// meaning |" documents section.key for a list section, and key itself
// otherwise. The path drops "[]" ("bgp.peers.asn"), as keyPaths does.
func referenceRows(t *testing.T) []docRow {
	t.Helper()
	data, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^#{2,3} `([a-zA-Z0-9.\\[\\]]+)`\\s*$")
	row := regexp.MustCompile("^\\| `([a-zA-Z0-9.\\[\\]]+)` \\| [^|]+ \\| ([^|]+) \\|")
	section := ""
	var rows []docRow
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "#") {
			section = ""
			if m := heading.FindStringSubmatch(l); m != nil {
				section = m[1]
			}
			continue
		}
		m := row.FindStringSubmatch(l)
		if m == nil || section == "" {
			continue
		}
		p := m[1]
		if strings.HasSuffix(section, "[]") {
			p = section + "." + p
		}
		rows = append(rows, docRow{path: strings.ReplaceAll(p, "[]", ""), def: strings.TrimSpace(m[2]), line: i + 1})
	}
	return rows
}

// TestReferenceDocumentsEveryKey: docs/config.md has a row for every key
// the parser accepts (every leaf of the Config type), and no row for a key
// it does not accept.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	rows := referenceRows(t)
	documented := map[string]bool{}
	for _, r := range rows {
		documented[r.path] = true
	}
	known := map[string]bool{}
	for _, p := range keyPaths(reflect.TypeFor[Config](), "") {
		known[p] = true
	}
	for _, p := range keyPaths(reflect.TypeFor[Config](), "") {
		if !documented[p] && !hasChildren(known, p) {
			t.Errorf("%s does not document %s", referenceFile, p)
		}
	}
	for _, r := range rows {
		if !known[r.path] {
			t.Errorf("%s:%d documents %s, which is not a key", referenceFile, r.line, r.path)
		}
	}
}

func hasChildren(known map[string]bool, p string) bool {
	for k := range known {
		if strings.HasPrefix(k, p+".") {
			return true
		}
	}
	return false
}

// defaultsDoc has one entry of every list, with only its required keys, so
// that every default is filled in (the advertise rule is a workloadIP one,
// the only kind with a handover).
const defaultsDoc = `node: {name: n1}
bgp:
  asn: 64512
  routerID: 192.0.2.10
  peers:
    - {name: tor, address: 192.0.2.1, asn: 65001}
advertise:
  - {name: vms, kind: workloadIP, networks: [default]}
import:
  - {name: up, peers: [tor], network: default, accept: [{prefix: 198.51.100.0/24}]}
bmp:
  servers:
    - {name: col, address: 192.0.2.50}
`

// TestReferenceDefaults: where docs/config.md gives a default as a literal
// (a cell that starts with a `value`, optionally followed by a
// parenthesis), it is the value the parser fills in.
func TestReferenceDefaults(t *testing.T) {
	c := mustParse(t, defaultsDoc)
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile("^`([^`]*)`(\\s*\\([^)]*\\))?$")
	checked := 0
	for _, r := range referenceRows(t) {
		m := literal.FindStringSubmatch(r.def)
		if m == nil {
			continue // required, derived, or prose
		}
		got, ok := lookup(tree, strings.Split(r.path, "."))
		if !ok {
			t.Errorf("%s:%d: %s has a documented default %s but no value in the parsed config", referenceFile, r.line, r.path, m[1])
			continue
		}
		checked++
		if g := render(got); g != m[1] {
			t.Errorf("%s:%d: %s defaults to %s, the document says %s", referenceFile, r.line, r.path, g, m[1])
		}
	}
	if checked < 30 {
		t.Errorf("only %d defaults checked: is the table format still \"| `key` | type | `default` | meaning |\"?", checked)
	}
}

// lookup walks a JSON tree along path, taking the first element of a list.
func lookup(v any, path []string) (any, bool) {
	for _, k := range path {
		if l, ok := v.([]any); ok {
			if len(l) == 0 {
				return nil, false
			}
			v = l[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// render writes a JSON value as docs/config.md writes a default.
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		if x == "" {
			return `""`
		}
		return x
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, render(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}
