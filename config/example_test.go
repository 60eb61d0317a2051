package config

import (
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

const exampleFile = "../config.example.yaml"

// TestExampleValidates loads the shipped example as the daemon would.
func TestExampleValidates(t *testing.T) {
	c, err := Load(exampleFile)
	if err != nil {
		t.Fatalf("Load(%s):\n%v", exampleFile, err)
	}
	if len(c.BGP.Peers) == 0 || len(c.Advertise) == 0 {
		t.Errorf("the example configures no peer or no advertise rule")
	}
}

// TestExampleDocumentsEveryKey walks the Config type and checks that every
// YAML key appears as "key:" in the example, commented out or not.
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range keyPaths(reflect.TypeFor[Config](), "") {
		k := path[len(parentPath(path)):]
		if k[0] == '.' {
			k = k[1:]
		}
		re := regexp.MustCompile(`(^|[\s{,#-])` + regexp.QuoteMeta(k) + `:`)
		if !re.Match(data) {
			t.Errorf("%s does not document %s (no %q)", exampleFile, path, k+":")
		}
	}
}

// keyPaths lists the YAML key paths of struct type t ("bgp.peers.asn").
func keyPaths(t reflect.Type, prefix string) []string {
	var paths []string
	for _, f := range yamlFields(t) {
		p := key(prefix, f.key)
		paths = append(paths, p)
		ft := t.Field(f.index).Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		switch ft {
		case reflect.TypeFor[time.Duration](), reflect.TypeFor[netip.Addr](), reflect.TypeFor[netip.Prefix]():
			continue
		}
		if ft.Kind() == reflect.Struct {
			paths = append(paths, keyPaths(ft, p)...)
		}
	}
	return paths
}

func TestKeyPathsSeesNestedKeys(t *testing.T) {
	paths := keyPaths(reflect.TypeFor[Config](), "")
	for _, want := range []string{"bgp.peers.bfd.multiplier", "import.targets.kernel.vrf", "import.accept.maxLength", "log.format"} {
		found := false
		for _, p := range paths {
			found = found || p == want
		}
		if !found {
			t.Errorf("keyPaths misses %s", want)
		}
	}
}

// TestExampleImportValidates un-comments the example's import rule and
// protectedPrefixes, shipped commented out, and validates the result.
func TestExampleImportValidates(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start, end := strings.Index(doc, "# import:\n"), strings.Index(doc, "\ncluster:\n")
	if start < 0 || end < start {
		t.Fatalf("%s: no commented-out import section before cluster:", exampleFile)
	}
	var lines []string
	for _, l := range strings.Split(doc[start:end], "\n") {
		if rest, ok := strings.CutPrefix(l, "# "); ok && (strings.HasPrefix(rest, " ") || strings.HasSuffix(strings.Fields(rest)[0], ":")) {
			l = rest
		}
		lines = append(lines, l)
	}
	c := mustParse(t, doc[:start]+strings.Join(lines, "\n")+doc[end:])
	if len(c.Import) != 1 || len(c.ProtectedPrefixes) != 1 {
		t.Errorf("import %+v, protectedPrefixes %v: want one of each", c.Import, c.ProtectedPrefixes)
	}
}
