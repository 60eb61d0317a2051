package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// guideFiles are the pages whose ```yaml blocks are ovnbgp configs (or
// parts of one) that a reader copies.
var guideFiles = []string{"../README.md", "../docs/aws.md", "../docs/bare-metal.md",
	"../docs/use-case-load-balancer.md", "../docs/operations.md"}

// guideBase completes a block that shows only some sections.
const guideBase = `node: {name: worker-0}
`
const guideBGP = `bgp:
  asn: 64512
  peers:
    - {name: tor, address: 192.0.2.1, asn: 65001}
`

// TestGuideConfigs: every config a guide shows parses and validates as it
// is (with a node name, and a BGP section when the block has none), so
// that a reader who copies one gets a daemon that starts. Credentials the
// blocks name exist in a fake $CREDENTIALS_DIRECTORY.
func TestGuideConfigs(t *testing.T) {
	creds := t.TempDir()
	for _, name := range []string{"tor-a", "tor-b", "rs-a", "rs-b"} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	checked := 0
	for _, f := range guideFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllStringSubmatch(string(data), -1) {
			doc := m[1]
			if strings.Contains(doc, "groups:") || strings.Contains(doc, "apiVersion:") {
				continue // a Prometheus rule file or a Kubernetes object, not an ovnbgp config
			}
			if !strings.Contains(doc, "node:") {
				doc = guideBase + doc
			}
			if !regexp.MustCompile(`(?m)^bgp:`).MatchString(doc) {
				doc += guideBGP
			}
			checked++
			if _, err := parse([]byte(doc), "config.yaml", fakeHost(map[string]string{"CREDENTIALS_DIRECTORY": creds})); err != nil {
				t.Errorf("%s: a config block does not load:\n%v\n--- block:\n%s", f, err, m[1])
			}
		}
	}
	if checked < 6 {
		t.Errorf("only %d config blocks found in the guides", checked)
	}
}
