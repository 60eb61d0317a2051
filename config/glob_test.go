package config

import (
	"strings"
	"testing"
)

// TestGlob: "*" matches every name, "/" and "." included (path.Match
// stopped at "/", so networks: ["*"] skipped such networks).
func TestGlob(t *testing.T) {
	tests := []struct {
		glob    string
		match   []string
		noMatch []string
	}{
		{"*", []string{"default", "ns/name", "a.b", "cluster_udn_x", "a/b/c", "", "x\ny"}, nil},
		{"ns/*", []string{"ns/a", "ns/", "ns/a/b"}, []string{"ns", "other/a", "xns/a"}},
		{"cluster_udn_*", []string{"cluster_udn_blue", "cluster_udn_a/b"}, []string{"cluster_udn", "ns_cluster_udn_x"}},
		{"bl?e", []string{"blue", "bl/e", "bl.e", "blée"}, []string{"ble", "bluee"}},
		{"a.b", []string{"a.b"}, []string{"aXb", "a.bc"}},
		{"a_*_c", []string{"a__c", "a_b_c", "a_/_c"}, []string{"a_c", "ab_c"}},
		{"[a-c]x", []string{"ax", "cx"}, []string{"dx", "Ax", "x"}},
		{"[!a-c]x", []string{"dx", "/x", ".x"}, []string{"ax", "x"}},
		{"[^/]*", []string{"a", "a/b"}, []string{"/a"}},
		{"\\*", []string{"*"}, []string{"a"}},
		{"a[-]b", []string{"a-b"}, []string{"aab"}},
		{"(x)|y+", []string{"(x)|y+"}, []string{"x", "y"}},
		{"default", []string{"default"}, []string{"default2", "Default"}},
	}
	for _, tt := range tests {
		g, err := ParseGlob(tt.glob)
		if err != nil {
			t.Errorf("ParseGlob(%q): %v", tt.glob, err)
			continue
		}
		if g.String() != tt.glob {
			t.Errorf("String() = %q, want %q", g, tt.glob)
		}
		for _, n := range tt.match {
			if !g.Match(n) {
				t.Errorf("%q does not match %q", tt.glob, n)
			}
		}
		for _, n := range tt.noMatch {
			if g.Match(n) {
				t.Errorf("%q matches %q", tt.glob, n)
			}
		}
	}
	for glob, msg := range map[string]string{
		"":      "empty pattern",
		"udn-[": "character class is not closed",
		"[]":    "empty character class",
		"[z-a]": "backwards",
		"a\\":   "lone \\",
		"\xff*": "not UTF-8",
		"[a-":   "not closed",
	} {
		if _, err := ParseGlob(glob); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseGlob(%q) = %v, want an error with %q", glob, err, msg)
		}
	}
	if (Glob{}).Match("") || MatchAny(nil, "x") {
		t.Errorf("the zero Glob or no glob matches")
	}
}

// TestGlobsInConfig: globs are compiled when the file is loaded, and an
// invalid one is reported with its key path.
func TestGlobsInConfig(t *testing.T) {
	c := mustParse(t, edit(t, "networks: [default]", `networks: ["*", "ns/*"]`))
	if g := c.Advertise[0].Networks; len(g) != 2 || !g[0].Match("a/b") || !g[1].Match("ns/x") || g[1].Match("x") {
		t.Errorf("networks = %v: not compiled as written", g)
	}
	errs := parseErrors(t, edit(t, "networks: [default]", `networks: [default, "[x"]`), fakeHost(nil))
	checkErrors(t, errs, want{"advertise[0].networks[1]", `"[x" is not a valid glob`, 16})
}
