package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const architectureFile = "../docs/architecture.md"

// contractKeys returns the key paths of the YAML block under "### Config
// keys" in docs/architecture.md ("Contracts"), a list's keys under the
// list's own path ("bgp.peers.asn"), as keyPaths gives them.
func contractKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(architectureFile)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n### Config keys\n")
	if !ok {
		t.Fatalf("%s has no section \"### Config keys\"", architectureFile)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatalf("%s: no yaml block under \"### Config keys\"", architectureFile)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: the yaml block under \"### Config keys\" is not closed", architectureFile)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("%s: the contract's yaml: %v", architectureFile, err)
	}
	var paths []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if c.Kind == yaml.MappingNode {
					walk(c, prefix)
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := key(prefix, n.Content[i].Value)
				paths = append(paths, p)
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(&doc, "")
	slices.Sort(paths)
	return slices.Compact(paths)
}

// TestContractKeys: the config keys of docs/architecture.md ("Contracts")
// are exactly the keys the parser accepts.
func TestContractKeys(t *testing.T) {
	listed := map[string]bool{}
	for _, p := range contractKeys(t) {
		listed[p] = true
	}
	known := map[string]bool{}
	for _, p := range keyPaths(reflect.TypeFor[Config](), "") {
		known[p] = true
		if !listed[p] {
			t.Errorf("%s, \"Config keys\", does not list %s", architectureFile, p)
		}
	}
	for p := range listed {
		if !known[p] {
			t.Errorf("%s, \"Config keys\", lists %s, which is not a key", architectureFile, p)
		}
	}
}
