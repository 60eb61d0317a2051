package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// LinkLocalNamespace is a further namespace joined to the node by a veth
// with no address but the IPv6 link-local ones the kernel gives each end:
// a link as unnumbered BGP runs on (issue 20).
type LinkLocalNamespace struct {
	// NS is the namespace's name.
	NS string
	// NodeLink is the veth's name in the node namespace, PeerLink in NS.
	NodeLink, PeerLink string
	// NodeLL and PeerLL are each end's link-local address, zoned with its
	// own side's link (fe80::…%veth-x on the node, %veth-peer in NS).
	NodeLL, PeerLL netip.Addr
}

// AddLinkLocalNamespace makes namespace <lab>-name joined to the node by
// veth "veth-<name>" (node side, name at most 10 characters) and
// "veth-peer" (its side), with duplicate address detection off so that
// the link-local addresses are usable at once. The namespace is removed
// at the end of the test, the processes in it first.
func (l *Lab) AddLinkLocalNamespace(name string) LinkLocalNamespace {
	t := l.T
	t.Helper()
	if len(name) > 10 {
		t.Fatalf("AddLinkLocalNamespace(%q): want a name of at most 10 characters", name)
	}
	p := LinkLocalNamespace{NS: NamePrefix + l.ID + "-" + name, NodeLink: "veth-" + name, PeerLink: "veth-peer"}
	if out, err := run("ip", "netns", "add", p.NS); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", p.NS, err, out)
	}
	t.Cleanup(func() { deleteNetns(t, p.NS) })
	steps := [][]string{
		{"ip", "-n", l.Node, "link", "add", p.NodeLink, "type", "veth", "peer", "name", p.PeerLink, "netns", p.NS},
		{"ip", "-n", p.NS, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", p.NS, "sh", "-c", "echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad; echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad; echo 0 >/proc/sys/net/ipv6/conf/" + p.PeerLink + "/accept_dad"},
		{"ip", "netns", "exec", l.Node, "sh", "-c", "echo 0 >/proc/sys/net/ipv6/conf/" + p.NodeLink + "/accept_dad"},
		{"ip", "-n", l.Node, "link", "set", p.NodeLink, "up"},
		{"ip", "-n", p.NS, "link", "set", p.PeerLink, "up"},
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.NodeLL, err = linkLocal(l.Node, p.NodeLink)
		if err == nil {
			p.PeerLL, err = linkLocal(p.NS, p.PeerLink)
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// linkLocal is dev's link-local address in namespace ns, zoned with dev.
func linkLocal(ns, dev string) (netip.Addr, error) {
	out, err := run("ip", "-n", ns, "-j", "-6", "addr", "show", "dev", dev, "scope", "link")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ip -n %s addr show dev %s: %v: %s", ns, dev, err, out)
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			Tentative bool   `json:"tentative"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return netip.Addr{}, fmt.Errorf("ip -j addr of %s in %s: %v", dev, ns, err)
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil && ip.IsLinkLocalUnicast() && !a.Tentative {
				return ip.WithZone(dev), nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("%s in %s has no usable link-local address yet", dev, ns)
}
