package config

import (
	"strings"
	"testing"
)

// TestDecodeProblems checks unknown keys, wrong-case keys and values of the
// wrong type: each reported with its key path and line, and without a
// second complaint about the same key (a bad asn is not also a missing asn).
func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name  string
		edits []string
		add   string
		wants []want
	}{
		{name: "wrong case", edits: []string{"  asn: 64512\n", "  ASN: 64512\n"},
			wants: []want{{"bgp.ASN", `keys are case-sensitive, write "asn"`, 4}}},
		{name: "wrong case camel", edits: []string{"  routerID:", "  routerId:"},
			wants: []want{{"bgp.routerId", `write "routerID"`, 5}}},
		{name: "typo with suggestion", edits: []string{"      address: 192.0.2.1\n", "      adress: 192.0.2.1\n"},
			wants: []want{{"bgp.peers[0].adress", `unknown key (did you mean "address"?)`, 8}}},
		{name: "truncated key", edits: []string{afterTorA, afterTorA + "      password: hunter2\n"},
			wants: []want{{"bgp.peers[0].password", `did you mean "passwordFile"?`, 10}}},
		{name: "unknown key without suggestion", add: "tuning: {fast: true}\n",
			wants: []want{{"tuning", "unknown key (valid keys here: node, bgp, ovn, advertise, import, protectedPrefixes, cluster, kernel, control, metrics, bmp, log, stateDir)", 17}}},
		{name: "duplicate key", edits: []string{afterNode, afterNode + "  name: n2\n"},
			wants: []want{{"node.name", "duplicate key (first given on line 2)", 3}}},
		{name: "not a number", edits: []string{"  asn: 64512\n", "  asn: abc\n"},
			wants: []want{{"bgp.asn", `"abc" is not a number`, 4}}},
		{name: "quoted number", edits: []string{"  asn: 64512\n", "  asn: \"64512\"\n"},
			wants: []want{{"bgp.asn", "remove the quotes", 4}}},
		{name: "negative unsigned", edits: []string{"  asn: 64512\n", "  asn: -1\n"},
			wants: []want{{"bgp.asn", "-1 is out of range (0..4294967295)", 4}}},
		{name: "too big", edits: []string{afterTorA, afterTorA + "      ebgpMultihop: 300\n"},
			wants: []want{{"bgp.peers[0].ebgpMultihop", "300 is out of range (0..255)", 10}}},
		{name: "fraction", edits: []string{afterTorA, afterTorA + "      maxPrefixes: 1.5\n"},
			wants: []want{{"bgp.peers[0].maxPrefixes", "not a whole number", 10}}},
		{name: "not a boolean", edits: []string{afterTorA, afterTorA + "      passive: yes\n"},
			wants: []want{{"bgp.peers[0].passive", `"yes" is not a boolean (true or false)`, 10}}},
		{name: "duration without unit", edits: []string{afterTorA, afterTorA + "      holdTime: 90\n"},
			wants: []want{{"bgp.peers[0].holdTime", `90 has no unit: write e.g. "90s"`, 10}}},
		{name: "not a duration", edits: []string{afterTorA, afterTorA + "      holdTime: soon\n"},
			wants: []want{{"bgp.peers[0].holdTime", `"soon" is not a duration (use Go syntax`, 10}}},
		{name: "not an IP address", edits: []string{"address: 2001:db8::1", "address: 192.0.2.300"},
			wants: []want{{"bgp.peers[1].address", `"192.0.2.300" is not an IP address`, 11}}},
		{name: "not a prefix", add: "protectedPrefixes: [10.0.0.1/8, 10.0.0.0/33]\n",
			wants: []want{
				{"protectedPrefixes[0]", `"10.0.0.1/8" has host bits set (did you mean 10.0.0.0/8?)`, 17},
				{"protectedPrefixes[1]", "not a prefix", 17}}},
		{name: "scalar for a list", edits: []string{afterTorA, afterTorA + "      families: ipv4\n"},
			wants: []want{{"bgp.peers[0].families", "expected a list, got a single value: write [ipv4]", 10}}},
		{name: "mapping for a list", edits: []string{"networks: [default]", "networks: {default: true}"},
			wants: []want{{"advertise[0].networks", "expected a list, got a mapping", 16}}},
		{name: "list for a value", edits: []string{"address: 192.0.2.1", "address: [192.0.2.1]"},
			wants: []want{{"bgp.peers[0].address", "expected a single value, got a list", 8}}},
		{name: "list for a mapping, nothing below reported", edits: []string{"node:\n  name: n1\n", "node: [n1]\n"},
			wants: []want{{"node", "expected a mapping (key: value), got a list", 1}}},
		{name: "scalar for a section", add: "log: debug\n",
			wants: []want{{"log", `expected a mapping (key: value), got the value "debug"`, 17}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := edit(t, tt.edits...) + tt.add
			checkErrors(t, parseErrors(t, doc, fakeHost(nil)), tt.wants...)
		})
	}
}

// TestUnknownKeyLine is the example of the design: the file name, the line,
// the key path as written and the key it probably meant.
func TestUnknownKeyLine(t *testing.T) {
	doc := `node: {name: n1}
bgp:
  asn: 64512
  routerID: 192.0.2.10
  peers:
    - name: tor-a
      pasword: /etc/ovnbgp/tor-a.md5
      address: 192.0.2.1
      asn: 65001
`
	errs := parseErrors(t, doc, fakeHost(nil))
	want := `config.yaml:7: bgp.peers[0].pasword: unknown key (did you mean "passwordFile"?)`
	if got := errs.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestSeveralProblems checks that every problem is reported at once,
// sorted by line, one per line of Error(), including a missing key (on its
// parent's line) next to bad values and unknown keys.
func TestSeveralProblems(t *testing.T) {
	doc := `node: {name: n1}
bgp:
  routerID: 192.0.2.10
  listenPort: 0
  peers:
    - name: tor-a
      address: 192.0.2.1
      asn: 65001
      holdTime: 1s
    - name: tor-a
      address: 192.0.2.300
      asn: 65002
      Port: 1790
log: {level: loud}
`
	errs := parseErrors(t, doc, fakeHost(nil))
	want := strings.Join([]string{
		`config.yaml:2: bgp.asn: required (1..4294967294)`,
		`config.yaml:4: bgp.listenPort: 0 is not a port: use -1 to never listen`,
		`config.yaml:9: bgp.peers[0].holdTime: 1s is out of range (3s..65535s)`,
		`config.yaml:10: bgp.peers[1].name: "tor-a" is also the name of bgp.peers[0]`,
		`config.yaml:11: bgp.peers[1].address: "192.0.2.300" is not an IP address`,
		`config.yaml:13: bgp.peers[1].Port: unknown key: keys are case-sensitive, write "port"`,
		`config.yaml:14: log.level: "loud" is not debug, info, warn or error`,
	}, "\n")
	if got := errs.Error(); got != want {
		t.Errorf("Error():\n%s\nwant:\n%s", got, want)
	}
}

func TestDocumentProblems(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		wants []want
	}{
		{name: "syntax error", doc: "bgp:\n  asn: 1\n peers: x\n",
			wants: []want{{"", "invalid YAML: did not find expected key", 2}}},
		{name: "tab indentation", doc: "bgp:\n\tasn: 1\n",
			wants: []want{{"", "invalid YAML", 2}}},
		{name: "two documents", doc: baseDoc + "---\nnode: {name: n2}\n",
			wants: []want{{"", "only one YAML document", 17}}},
		{name: "empty document", doc: "# nothing yet\n",
			wants: []want{{"bgp.asn", "required", 0}, {"bgp.peers", "at least one peer", 0}}},
		{name: "list at the top", doc: "- bgp\n",
			wants: []want{{"", "expected a mapping", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrors(t, parseErrors(t, tt.doc, fakeHost(nil)), tt.wants...)
		})
	}
}

func TestSuggest(t *testing.T) {
	fields := yamlFields(typeOf[Peer]())
	tests := []struct {
		typo, want string
		ok         bool
	}{
		{"adress", "address", true},
		{"holdtime", "holdTime", true},
		{"keepalive", "keepaliveTime", true},
		{"passwd", "passwordFile", true},
		{"timers", "", false},
		{"bfdd", "bfd", true},
		{"xyzzy", "", false},
	}
	for _, tt := range tests {
		got, ok := suggest(tt.typo, fields)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("suggest(%q) = %q, %v; want %q, %v", tt.typo, got, ok, tt.want, tt.ok)
		}
	}
}
