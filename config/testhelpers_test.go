package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// baseDoc is a small valid configuration the tests edit: tor-a is eBGP,
// tor-b iBGP.
const baseDoc = `node:
  name: n1
bgp:
  asn: 64512
  routerID: 192.0.2.10
  peers:
    - name: tor-a
      address: 192.0.2.1
      asn: 65001
    - name: tor-b
      address: 2001:db8::1
      asn: 64512
advertise:
  - name: pods
    kind: podNetwork
    networks: [default]
`

// edit applies old→new replacements to baseDoc; each old must occur.
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	doc := baseDoc
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(doc, pairs[i]) {
			t.Fatalf("edit: %q is not in the base document", pairs[i])
		}
		doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
	}
	return doc
}

// Anchors in baseDoc to add keys after.
const (
	afterTorA  = "      asn: 65001\n"
	afterTorB  = "      asn: 64512\n"
	afterBGP   = "  routerID: 192.0.2.10\n"
	afterPods  = "    networks: [default]\n"
	afterNode  = "  name: n1\n"
	peersStart = "  peers:\n"
)

// fakeHost is a host with a known hostname and addresses, an environment
// from env, and the real file system.
func fakeHost(env map[string]string) host {
	return host{
		hostname:        func() (string, error) { return "Worker-7.example.com", nil },
		kubeletNodeName: func() string { return env["KUBELET_NODE_NAME"] },
		interfaceAddrs: func() ([]net.Addr, error) {
			return []net.Addr{
				ipNet("127.0.0.1/8"), ipNet("::1/128"), ipNet("fe80::1/64"),
				ipNet("169.254.1.1/16"), ipNet("2001:db8::7/64"),
				ipNet("10.1.2.3/24"), ipNet("192.0.2.99/24"),
			}, nil
		},
		getenv:   func(k string) string { return env[k] },
		readFile: readRegular,
		stat:     os.Stat,
	}
}

func ipNet(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// mustParse parses doc with fakeHost and fails the test on any error.
func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := parse([]byte(doc), "config.yaml", fakeHost(nil))
	if err != nil {
		t.Fatalf("parse: unexpected error:\n%v\ndocument:\n%s", err, doc)
	}
	return c
}

// parseErrors parses doc with h and returns its Errors; it fails the test
// if parsing succeeds or returns another error type.
func parseErrors(t *testing.T, doc string, h host) Errors {
	t.Helper()
	c, err := parse([]byte(doc), "config.yaml", h)
	if err == nil {
		t.Fatalf("parse: no error, want some; document:\n%s", doc)
	}
	if c != nil {
		t.Errorf("parse returned a Config along with an error")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("parse error is %T, want Errors: %v", err, err)
	}
	return errs
}

// want is an expected problem: its path, a part of its message and, when
// not 0, its line.
type want struct {
	path string
	msg  string
	line int
}

func (w want) String() string { return fmt.Sprintf("%d %s: …%s…", w.line, w.path, w.msg) }

// checkErrors asserts that errs holds exactly one problem per want, in any
// order, and nothing else.
func checkErrors(t *testing.T, errs Errors, wants ...want) {
	t.Helper()
	used := make([]bool, len(errs))
	for _, w := range wants {
		found := false
		for i, e := range errs {
			if !used[i] && e.Path == w.path && strings.Contains(e.Msg, w.msg) && (w.line == 0 || e.Line == w.line) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem %v", w)
		}
	}
	for i, e := range errs {
		if !used[i] {
			t.Errorf("unexpected problem: %v", e)
		}
	}
}

// mustGlob compiles a glob or fails the test.
func mustGlob(t *testing.T, s string) Glob {
	t.Helper()
	g, err := ParseGlob(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// typeOf is reflect.TypeFor, short.
func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
