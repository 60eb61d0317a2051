package config

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// socketAt listens on a unix socket at path (creating its directory) until
// the test ends.
func socketAt(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

// shortTemp is a temporary directory with a short path (unix socket paths
// are at most 107 bytes).
func shortTemp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nbsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestDefaultNorthboundSockets: OpenShift's interconnect path first, then
// OVN's own run directory (docs/architecture.md, "Config keys").
func TestDefaultNorthboundSockets(t *testing.T) {
	want := []string{"/var/run/ovn-ic/ovnnb_db.sock", "/var/run/ovn/ovnnb_db.sock"}
	if d := cmp.Diff(want, DefaultNorthboundSockets()); d != "" {
		t.Errorf("DefaultNorthboundSockets (-want +got):\n%s", d)
	}
	DefaultNorthboundSockets()[0] = "changed"
	if DefaultNorthboundSockets()[0] != want[0] {
		t.Error("DefaultNorthboundSockets returns shared state")
	}
}

// TestNorthboundFind: with ovn.northbound unset, Find returns the
// candidates that are unix sockets, in order (IC first), and says what it
// found at each path; a configured endpoint is returned as it is.
func TestNorthboundFind(t *testing.T) {
	type cand = NBCandidate
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ic, ovn string)
		want  func(ic, ovn string) ([]string, []cand)
	}{
		{"IC only", func(t *testing.T, ic, _ string) { socketAt(t, ic) },
			func(ic, ovn string) ([]string, []cand) {
				return []string{"unix:" + ic}, []cand{{ic, NBSocket}, {ovn, NBAbsent}}
			}},
		{"fallback: only /var/run/ovn", func(t *testing.T, _, ovn string) { socketAt(t, ovn) },
			func(ic, ovn string) ([]string, []cand) {
				return []string{"unix:" + ovn}, []cand{{ic, NBAbsent}, {ovn, NBSocket}}
			}},
		{"both: IC first", func(t *testing.T, ic, ovn string) { socketAt(t, ovn); socketAt(t, ic) },
			func(ic, ovn string) ([]string, []cand) {
				return []string{"unix:" + ic, "unix:" + ovn}, []cand{{ic, NBSocket}, {ovn, NBSocket}}
			}},
		{"neither", func(*testing.T, string, string) {},
			func(ic, ovn string) ([]string, []cand) {
				return nil, []cand{{ic, NBAbsent}, {ovn, NBAbsent}}
			}},
		{"a regular file is no socket", func(t *testing.T, ic, ovn string) {
			if err := os.MkdirAll(filepath.Dir(ic), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ic, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			socketAt(t, ovn)
		}, func(ic, ovn string) ([]string, []cand) {
			return []string{"unix:" + ovn}, []cand{{ic, NBNotSocket}, {ovn, NBSocket}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := shortTemp(t)
			ic, ovn := filepath.Join(root, "var/run/ovn-ic/ovnnb_db.sock"), filepath.Join(root, "var/run/ovn/ovnnb_db.sock")
			tc.setup(t, ic, ovn)
			target, err := OVN{NorthboundSockets: []string{ic, ovn}}.Target()
			if err != nil {
				t.Fatal(err)
			}
			if target.Source != NBDiscovered {
				t.Errorf("Source = %q, want %q", target.Source, NBDiscovered)
			}
			eps, tried := target.Find()
			wantEps, wantTried := tc.want(ic, ovn)
			if d := cmp.Diff(wantEps, eps.Strings(), cmpEmpty); d != "" {
				t.Errorf("endpoints (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantTried, tried); d != "" {
				t.Errorf("tried (-want +got):\n%s", d)
			}
			if len(eps) == 0 {
				msg := target.NotFound(tried).Error()
				for _, s := range []string{ic, ovn, "ovn.northbound", "keeps looking"} {
					if !strings.Contains(msg, s) {
						t.Errorf("NotFound %q does not name %q", msg, s)
					}
				}
			}
		})
	}
}

var cmpEmpty = cmp.Transformer("empty", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

// TestNorthboundFindLater: Find looks again each time: a socket that
// appears after the first look is found by the next (the daemon retries).
func TestNorthboundFindLater(t *testing.T) {
	root := shortTemp(t)
	ic, ovn := filepath.Join(root, "var/run/ovn-ic/ovnnb_db.sock"), filepath.Join(root, "var/run/ovn/ovnnb_db.sock")
	target, err := OVN{NorthboundSockets: []string{ic, ovn}}.Target()
	if err != nil {
		t.Fatal(err)
	}
	if eps, _ := target.Find(); len(eps) != 0 {
		t.Fatalf("found %v in an empty root", eps)
	}
	socketAt(t, ic)
	if eps, _ := target.Find(); eps.String() != "unix:"+ic {
		t.Errorf("after the socket appeared: %v, want unix:%s", eps, ic)
	}
}

// TestNorthboundConfigured: a set ovn.northbound is used as it is, with no
// look at the file system, and says so.
func TestNorthboundConfigured(t *testing.T) {
	target, err := OVN{Northbound: "unix:/nowhere/nb.sock,tcp:192.0.2.5:6641"}.Target()
	if err != nil {
		t.Fatal(err)
	}
	eps, tried := target.Find()
	if target.Source != NBConfigured || eps.String() != "unix:/nowhere/nb.sock,tcp:192.0.2.5:6641" || tried != nil {
		t.Errorf("Target %+v Find = %v, %v: want configured, the endpoints as written, nothing tried", target, eps, tried)
	}
	if _, err := (OVN{Northbound: "http:x"}).Target(); err == nil {
		t.Error("a bad endpoint gave no error")
	}
	// Unset, without a list: the default list.
	target, err = OVN{}.Target()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(DefaultNorthboundSockets(), target.Sockets); d != "" || target.Source != NBDiscovered {
		t.Errorf("OVN{}.Target() = %+v, want discovered from the default sockets", target)
	}
}

// TestNorthboundKeys: unset, ovn.northbound is discovered and the
// effective config lists the sockets looked for; northboundSockets is
// checked and is refused beside a set ovn.northbound.
func TestNorthboundKeys(t *testing.T) {
	c := mustParse(t, baseDoc)
	if c.OVN.Northbound != "" {
		t.Errorf("ovn.northbound = %q when unset, want \"\" (discovered)", c.OVN.Northbound)
	}
	if d := cmp.Diff(DefaultNorthboundSockets(), c.OVN.NorthboundSockets); d != "" {
		t.Errorf("ovn.northboundSockets when unset (-want +got):\n%s", d)
	}
	c = mustParse(t, baseDoc+"ovn:\n  northboundSockets: [/run/a.sock, /run/b.sock]\n")
	if d := cmp.Diff([]string{"/run/a.sock", "/run/b.sock"}, c.OVN.NorthboundSockets); d != "" {
		t.Errorf("ovn.northboundSockets (-want +got):\n%s", d)
	}
	c = mustParse(t, baseDoc+"ovn:\n  northbound: tcp:192.0.2.5:6641\n")
	if len(c.OVN.NorthboundSockets) != 0 {
		t.Errorf("northboundSockets = %v with ovn.northbound set, want none", c.OVN.NorthboundSockets)
	}
	for _, tc := range []struct {
		add  string
		want want
	}{
		{"ovn:\n  northbound: tcp:192.0.2.5:6641\n  northboundSockets: [/run/a.sock]\n",
			want{"ovn.northboundSockets", "only used while ovn.northbound is unset", 19}},
		{"ovn:\n  northboundSockets: [run/a.sock]\n", want{"ovn.northboundSockets[0]", "not an absolute path", 18}},
		{"ovn:\n  northboundSockets: [/run/a.sock, /run/a.sock]\n", want{"ovn.northboundSockets[1]", "listed twice", 18}},
		{"ovn:\n  northboundSockets: [\"\"]\n", want{"ovn.northboundSockets[0]", "not an absolute path", 18}},
	} {
		errs := parseErrors(t, baseDoc+tc.add, fakeHost(nil))
		found := false
		for _, e := range errs {
			if e.Path == tc.want.path && strings.Contains(e.Msg, tc.want.msg) && e.Line == tc.want.line {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: errors %v, want %v", tc.add, errs, tc.want)
		}
	}
}

// TestKubeletNodeName: on OpenShift the kubelet's node name comes from
// KUBELET_NODE_NAME in /etc/kubernetes/node.env when the platform writes it
// (AWS: the instance's local-hostname); node.name defaults to it, then to
// the hostname.
func TestKubeletNodeName(t *testing.T) {
	for in, want := range map[string]string{
		"KUBELET_NODE_NAME=ip-10-0-1-2.ec2.internal\n":                          "ip-10-0-1-2.ec2.internal",
		"FOO=1\nKUBELET_NODE_NAME=\"ip-10-0-1-2.us-west-2.compute.internal\"\n": "ip-10-0-1-2.us-west-2.compute.internal",
		"KUBELET_NODE_NAME=a\nKUBELET_NODE_NAME=b\n":                            "b",
		"KUBELET_NODE_NAME=\n":                                                  "",
		"# KUBELET_NODE_NAME=x\nKUBELET_NODE_IP=10.0.1.2\n":                     "",
		"": "",
	} {
		if got := kubeletNodeName([]byte(in)); got != want {
			t.Errorf("kubeletNodeName(%q) = %q, want %q", in, got, want)
		}
	}
	doc := strings.Replace(baseDoc, "node:\n  name: n1\n", "", 1)
	c, err := parse([]byte(doc), "c.yaml", fakeHost(map[string]string{"KUBELET_NODE_NAME": "IP-10-0-1-2.ec2.internal"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.Name != "ip-10-0-1-2.ec2.internal" {
		t.Errorf("node.name = %q, want the kubelet's ip-10-0-1-2.ec2.internal", c.Node.Name)
	}
	if c := mustParse(t, doc); c.Node.Name != "worker-7.example.com" {
		t.Errorf("node.name without node.env = %q, want the hostname lower-cased", c.Node.Name)
	}
}
