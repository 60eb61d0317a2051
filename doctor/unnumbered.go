package doctor

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/nd"
)

// unnumberedLinks are the devices of the unnumbered peers, each with its
// peers' names, in config order.
func unnumberedLinks(c *config.Config) (devs []string, peers map[string][]string) {
	peers = map[string][]string{}
	for _, p := range c.BGP.Peers {
		if !p.Unnumbered() {
			continue
		}
		if peers[p.Interface] == nil {
			devs = append(devs, p.Interface)
		}
		peers[p.Interface] = append(peers[p.Interface], p.Name)
	}
	return devs, peers
}

// checkUnnumbered: each unnumbered peer's interface has IPv6 on (the
// device's and all's disable_ipv6), a usable link-local address (not
// tentative, not failed DAD), a link-local router neighbour (the peer's
// router advertisements arrive), and does not take a default route from
// those advertisements. The session runs between the two link-local
// addresses, and the peer's address is learned from its advertisements
// (package nd), so each of these stops the session.
func checkUnnumbered(_ context.Context, s *state) []Result {
	const id = "unnumbered"
	if s.cfg == nil {
		return needConfig(id)
	}
	devs, peers := unnumberedLinks(s.cfg)
	if len(devs) == 0 {
		return []Result{skip(id, "no unnumbered peer (interface without address)")}
	}
	fsys := s.env.Files()
	rt, rtErr := s.env.Routing()
	if rtErr == nil {
		defer rt.Close()
	}
	var out []Result
	for _, dev := range devs {
		who := fmt.Sprintf("%s (peers %s)", dev, strings.Join(peers[dev], ", "))
		r := ipv6Enabled(fsys, dev, who, peers[dev])
		out = append(out, r)
		if r.Status == Fail {
			out = append(out, skip("link-local/"+dev, "needs IPv6 on %s", dev), skip("neighbour/"+dev, "needs IPv6 on %s", dev))
			continue
		}
		if rtErr != nil {
			out = append(out, warn("link-local/"+dev, "run doctor as root on the node", "cannot read the links: %v", rtErr))
			continue
		}
		facts, err := rt.Link(dev)
		if err != nil {
			out = append(out, fail("link-local/"+dev, "fix bgp.peers["+peers[dev][0]+"].interface, or create the device",
				"cannot read %s: %v", who, err))
			continue
		}
		ll := linkLocal(fsys, facts, who)
		out = append(out, ll)
		if ll.Status == Fail {
			out = append(out, skip("neighbour/"+dev, "needs a usable link-local address on %s", dev))
		} else {
			out = append(out, neighbour(facts, who))
		}
		out = append(out, acceptRA(fsys, dev, who))
	}
	return out
}

// ipv6Enabled: the kernel has IPv6, and neither conf.all nor conf.<dev>
// turns it off.
func ipv6Enabled(fsys fs.FS, dev, who string, peers []string) Result {
	id := "ipv6-enabled/" + dev
	if _, err := fs.Stat(fsys, "proc/sys/net/ipv6"); notExist(err) {
		return fail(id, "remove ipv6.disable=1 from the kernel command line and reboot",
			"the kernel has no IPv6 (/proc/sys/net/ipv6 is missing: booted with ipv6.disable=1?): %s cannot peer unnumbered", who)
	}
	all, errAll := sysctl(fsys, "net", "ipv6", "conf", "all", "disable_ipv6")
	n, err := sysctl(fsys, "net", "ipv6", "conf", dev, "disable_ipv6")
	key := sysctlKey("net", "ipv6", "conf", dev, "disable_ipv6")
	switch {
	case notExist(err):
		return fail(id, "fix bgp.peers["+peers[0]+"].interface, or create the device (doctor must run in the node's network namespace)",
			"device %s does not exist (no /proc/sys/net/ipv6/conf/%s)", who, dev)
	case err != nil || errAll != nil:
		return warn(id, "run doctor as root on the node", "cannot read %s: %v", key, firstErr(errAll, err))
	case all != 0 && n != 0:
		return fail(id, "sysctl -w net.ipv6.conf.all.disable_ipv6=0 "+key+"=0, and keep it in /etc/sysctl.d/",
			"IPv6 is disabled on %s (net.ipv6.conf.all.disable_ipv6 = 1, %s = 1)", who, key)
	case n != 0:
		return fail(id, "sysctl -w "+key+"=0, and keep it in /etc/sysctl.d/", "IPv6 is disabled on %s (%s = 1)", who, key)
	case all != 0:
		// Setting all to 1 turns IPv6 off on every device at once; a
		// device turned back on since then reads 0.
		return warn(id, "sysctl -w net.ipv6.conf.all.disable_ipv6=0, and keep it in /etc/sysctl.d/",
			"net.ipv6.conf.all.disable_ipv6 is 1 (%s is 0): a new device, or %s after a reboot, comes up without IPv6", key, dev)
	}
	return pass(id, "IPv6 is on on %s", who)
}

// linkLocal: the device has a link-local address the session can use.
func linkLocal(fsys fs.FS, f nd.LinkFacts, who string) Result {
	id := "link-local/" + f.Name
	if a := f.Usable(); a.IsValid() {
		return pass(id, "%s has link-local address %s", who, a.WithZone(""))
	}
	for _, a := range f.LinkLocals {
		if a.DADFailed {
			return fail(id, "another host on "+f.Name+" has "+a.Addr.WithZone("").String()+": remove the duplicate, or give the link another one (`ip -6 addr add fe80::…/64 dev "+f.Name+"`)",
				"the link-local address %s of %s failed duplicate address detection", a.Addr.WithZone(""), who)
		}
	}
	for _, a := range f.LinkLocals {
		if a.Tentative {
			return warn(id, "wait a second (duplicate address detection runs after link up) and run doctor again; "+sysctlKey("net", "ipv6", "conf", f.Name, "accept_dad")+"=0 skips it",
				"the link-local address %s of %s is tentative (duplicate address detection running): the session cannot use it yet", a.Addr.WithZone(""), who)
		}
	}
	key := sysctlKey("net", "ipv6", "conf", f.Name, "addr_gen_mode")
	if n, err := sysctl(fsys, "net", "ipv6", "conf", f.Name, "addr_gen_mode"); err == nil && n == 1 {
		return fail(id, "sysctl -w "+key+"=0, then `ip link set "+f.Name+" down; ip link set "+f.Name+" up`; or add one: `ip -6 addr add fe80::…/64 dev "+f.Name+"`",
			"%s has no link-local address: %s is 1 (none), so the kernel makes none", who, key)
	}
	return fail(id, "`ip link set "+f.Name+" down; ip link set "+f.Name+" up` makes one, or add one: `ip -6 addr add fe80::…/64 dev "+f.Name+"`",
		"%s has no link-local address", who)
}

// neighbour: the peer's router advertisements arrive: one link-local
// router neighbour (NTF_ROUTER) other than the node itself.
func neighbour(f nd.LinkFacts, who string) Result {
	id := "neighbour/" + f.Name
	if !f.Up {
		return fail(id, "ip link set "+f.Name+" up, and check the cable and the peer's port", "%s is down", who)
	}
	var routers, others []string
	for _, n := range f.Neighbours {
		s := fmt.Sprintf("%s (%s)", n.Addr.WithZone(""), n.State)
		if n.Router {
			routers = append(routers, s)
		} else {
			others = append(others, s)
		}
	}
	slices.Sort(routers)
	fix := "the peer must send router advertisements on " + f.Name + " (FRR does for `neighbor <if> interface`, every 10 s); a peer that sends none (BIRD, gobgp) needs its address given: address: fe80::…%" + f.Name
	switch {
	case len(routers) == 1:
		return pass(id, "router %s seen on %s (from its router advertisements)", routers[0], who)
	case len(routers) > 1:
		return warn(id, "connect "+f.Name+" to one router only, or give the peer's address (address: fe80::…%"+f.Name+")",
			"%d routers seen on %s: %s: unnumbered peering expects one neighbour on a point-to-point link", len(routers), who, strings.Join(routers, ", "))
	case len(others) > 0:
		return warn(id, fix, "no router seen on %s: link-local neighbours %s sent no router advertisement", who, strings.Join(others, ", "))
	}
	return warn(id, fix, "no link-local neighbour seen on %s: no router advertisement received yet", who)
}

// acceptRA: the node takes no default route from the peer's router
// advertisements (FRR's carry router lifetime 30 s): the kernel does with
// accept_ra 2, or 1 on a device that does not forward.
func acceptRA(fsys fs.FS, dev, who string) Result {
	id := "accept-ra/" + dev
	ra, err1 := sysctl(fsys, "net", "ipv6", "conf", dev, "accept_ra")
	fwd, err2 := sysctl(fsys, "net", "ipv6", "conf", dev, "forwarding")
	if err := firstErr(err1, err2); err != nil {
		return warn(id, "run doctor as root on the node", "cannot read accept_ra and forwarding of %s: %v", dev, err)
	}
	key := sysctlKey("net", "ipv6", "conf", dev, "accept_ra")
	if ra == 2 || (ra == 1 && fwd == 0) {
		return warn(id, "sysctl -w "+key+"=0, and keep it in /etc/sysctl.d/",
			"%s = %d (forwarding %d): the kernel installs a default route via the peer from its router advertisements on %s", key, ra, fwd, who)
	}
	return pass(id, "%s = %d (forwarding %d): the peer's router advertisements install no default route", key, ra, fwd)
}
