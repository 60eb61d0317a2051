// Command schematrim writes the subset of the OVN Northbound schema that
// ovnbgp uses: the tables it reads or writes, minus any column that refers to
// a table left out. Smaller models connect to more OVN versions (libovsdb
// refuses models that are newer than the server's schema, and accepts ones
// with fewer tables and columns). It runs from ovn/nbdb's go:generate line.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "", "full OVN NB schema (.ovsschema)")
	out := flag.String("out", "", "trimmed schema to write")
	flag.Parse()
	if err := trim(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "schematrim:", err)
		os.Exit(1)
	}
}

// keep lists the tables ovnbgp reads or writes. Of NB_Global only options
// is read (northd's version); its connections and ssl refer to tables left
// out, and go.
var keep = map[string]bool{
	"NB_Global":                   true,
	"Logical_Switch":              true,
	"Logical_Switch_Port":         true,
	"Logical_Router":              true,
	"Logical_Router_Port":         true,
	"Logical_Router_Static_Route": true,
	"NAT":                         true,
	"Load_Balancer":               true,
	"DHCP_Options":                true,
}

func trim(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	tables, _ := schema["tables"].(map[string]any)
	for name, t := range tables {
		if !keep[name] {
			delete(tables, name)
			continue
		}
		cols, _ := t.(map[string]any)["columns"].(map[string]any)
		for cname, c := range cols {
			if ref := refTable(c); ref != "" && !keep[ref] {
				delete(cols, cname)
			}
		}
	}
	b, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// refTable returns the table a column refers to, in its key or value.
func refTable(col any) string {
	typ, _ := col.(map[string]any)["type"].(map[string]any)
	for _, side := range []string{"key", "value"} {
		if m, ok := typ[side].(map[string]any); ok {
			if r, ok := m["refTable"].(string); ok {
				return r
			}
		}
	}
	return ""
}
