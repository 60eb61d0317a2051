package e2e

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The peer matrix's peers (peer_matrix_test.go): FRR, BIRD, gobgpd and
// ExaBGP, each driven its own way to announce, withdraw, change a next hop,
// reset, restart gracefully and turn BFD on.

// sortedPrefixes returns the prefixes of r, sorted.
func sortedPrefixes(r mxRoutes) []netip.Prefix {
	var ps []netip.Prefix
	for p := range r {
		ps = append(ps, p)
	}
	lab.SortPrefixes(ps)
	return ps
}

// --- FRR ---

// mxFRR: `network P` per route; another next hop through an outbound
// route-map (`set ip next-hop`, `set ipv6 next-hop global`) matching a
// prefix-list, then `clear bgp ... soft out` so that it goes out at once
// (not after the route-map delay timer).
type mxFRR struct {
	w   *mxWorld
	f   *lab.FRR
	cfg lab.FRRConfig
	gr  bool
	cur mxRoutes
}

func startMxFRR(gr bool) func(w *mxWorld, routes mxRoutes) mxPeer {
	return func(w *mxWorld, routes mxRoutes) mxPeer {
		p := &mxFRR{w: w, gr: gr, cur: routes.clone()}
		p.cfg = lab.FRRConfig{ASN: 65001, GracefulRestart: gr, Originate: sortedPrefixes(routes)}
		for _, a := range []netip.Addr{lab.NodeIPv4, lab.NodeIPv6} {
			// BFD here only so that bfdd runs; it is off until the bfd cell
			p.cfg.Neighbors = append(p.cfg.Neighbors, lab.FRRNeighbor{Address: a, ASN: 65010, Passive: true,
				Keepalive: 2, HoldTime: int(mxHold.Seconds()), BFD: true})
		}
		p.f = w.l.StartFRR(p.cfg)
		cmds := append([]string{"router bgp 65001", "no neighbor " + lab.NodeIPv4.String() + " bfd",
			"no neighbor " + lab.NodeIPv6.String() + " bfd", "exit"}, p.extras(routes)...)
		if err := p.f.Config(cmds...); err != nil {
			w.t.Fatalf("frr config: %v", err)
		}
		return p
	}
}

// seq is the prefix-list sequence number of p.
func seq(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 10 + int(p.Addr().As4()[2])
	}
	return 10 + int(p.Addr().As16()[7])
}

// extras is FRR's config beyond FRRConfig: the next-hop route-maps and,
// with graceful restart, preserve-fw-state (the F bit).
func (p *mxFRR) extras(routes mxRoutes) []string {
	lines := []string{"ip prefix-list NH4 seq 1000 deny any", "ipv6 prefix-list NH6 seq 1000 deny any"}
	for _, pfx := range sortedPrefixes(routes) {
		if routes[pfx].IsValid() {
			lines = append(lines, p.plist(pfx, false))
		}
	}
	lines = append(lines,
		"route-map NHOUT4 permit 10", "match ip address prefix-list NH4", "set ip next-hop "+mxAlt[0].String(), "exit",
		"route-map NHOUT4 permit 20", "exit",
		"route-map NHOUT6 permit 10", "match ipv6 address prefix-list NH6", "set ipv6 next-hop global "+mxAlt[1].String(), "exit",
		"route-map NHOUT6 permit 20", "exit",
		"router bgp 65001")
	if p.gr {
		lines = append(lines, "bgp graceful-restart preserve-fw-state")
	}
	return append(lines,
		"address-family ipv4 unicast", "neighbor "+lab.NodeIPv4.String()+" route-map NHOUT4 out", "exit-address-family",
		"address-family ipv6 unicast", "neighbor "+lab.NodeIPv6.String()+" route-map NHOUT6 out", "exit-address-family",
		"exit")
}

func (p *mxFRR) plist(pfx netip.Prefix, no bool) string {
	s := fmt.Sprintf("ip prefix-list NH4 seq %d permit %s", seq(pfx), pfx)
	if pfx.Addr().Is6() {
		s = fmt.Sprintf("ipv6 prefix-list NH6 seq %d permit %s", seq(pfx), pfx)
	}
	if no {
		return "no " + s
	}
	return s
}

func (p *mxFRR) announce(routes mxRoutes) error {
	var pl []string
	var nets [2][]string
	soft := [2]bool{}
	for _, pfx := range sortedPrefixes(routes) {
		old, had := p.cur[pfx]
		nh := routes[pfx]
		if !had {
			nets[fam(pfx)] = append(nets[fam(pfx)], "network "+pfx.String())
		}
		if nh != old {
			if old.IsValid() {
				pl = append(pl, p.plist(pfx, true))
			}
			if nh.IsValid() {
				pl = append(pl, p.plist(pfx, false))
			}
			soft[fam(pfx)] = soft[fam(pfx)] || had
		}
	}
	for _, pfx := range sortedPrefixes(p.cur) {
		if _, ok := routes[pfx]; !ok {
			nets[fam(pfx)] = append(nets[fam(pfx)], "no network "+pfx.String())
			if p.cur[pfx].IsValid() {
				pl = append(pl, p.plist(pfx, true))
			}
		}
	}
	cmds := append(pl, "router bgp 65001",
		"address-family ipv4 unicast")
	cmds = append(cmds, nets[0]...)
	cmds = append(cmds, "exit-address-family", "address-family ipv6 unicast")
	cmds = append(cmds, nets[1]...)
	cmds = append(cmds, "exit-address-family")
	if err := p.f.Config(cmds...); err != nil {
		return err
	}
	for i, a := range []netip.Addr{lab.NodeIPv4, lab.NodeIPv6} {
		if soft[i] {
			if err := p.f.Config("do clear bgp " + mxFamilies[i] + " unicast " + a.String() + " soft out"); err != nil {
				return err
			}
		}
	}
	p.cur = routes.clone()
	return nil
}

func (p *mxFRR) notify() error {
	for _, a := range []netip.Addr{lab.NodeIPv4, lab.NodeIPv6} {
		// a hard reset: Cease/Administrative Reset (FRR 8.4 sends it as a
		// Hard Reset when RFC 8538 is negotiated; ovnbgp does not offer it)
		if err := p.f.Config("do clear bgp " + a.String()); err != nil {
			return err
		}
	}
	return nil
}

func (p *mxFRR) bfdOn() error {
	return p.f.Config("router bgp 65001", "neighbor "+lab.NodeIPv4.String()+" bfd profile lab",
		"neighbor "+lab.NodeIPv6.String()+" bfd profile lab")
}

func (p *mxFRR) grRestart(routes mxRoutes, whileDown func()) error {
	cfg := p.cfg
	cfg.Originate = sortedPrefixes(routes)
	cfg.Neighbors = append([]lab.FRRNeighbor(nil), cfg.Neighbors...)
	for i := range cfg.Neighbors {
		cfg.Neighbors[i].BFD = false
	}
	conf, err := cfg.Render(p.f.NS, p.f.Dir)
	if err != nil {
		return err
	}
	conf += strings.Join(p.extras(routes), "\n") + "\n"
	if err := p.f.KillBGPD(); err != nil {
		return err
	}
	whileDown()
	if err := p.f.StartBGPD(conf); err != nil {
		return err
	}
	p.cur = routes.clone()
	return nil
}

// --- BIRD ---

// mxBIRD: static blackholes (s4, s6) exported to two BGP protocols (node1
// IPv4, node1v6 IPv6); another next hop set by the export filter
// (bgp_next_hop); every change a new config and `birdc configure`.
type mxBIRD struct {
	w   *mxWorld
	b   *lab.BIRD
	gr  bool
	bfd bool
}

func startMxBIRD(gr bool) func(w *mxWorld, routes mxRoutes) mxPeer {
	return func(w *mxWorld, routes mxRoutes) mxPeer {
		p := &mxBIRD{w: w, gr: gr}
		p.b = w.l.StartBIRD(w.l.Tor, lab.BIRDConfig{Text: func(dir string) string { return p.render(dir, routes) }})
		return p
	}
}

func (p *mxBIRD) render(dir string, routes mxRoutes) string {
	var b strings.Builder
	fmt.Fprintf(&b, "log %q all;\nrouter id %s;\nprotocol device { }\n", dir+"/bird.log", lab.TorIPv4)
	var filters [2]strings.Builder
	for i, f := range mxFamilies {
		fmt.Fprintf(&b, "protocol static s%d {\n  %s;\n", 4+2*i, f)
		for _, pfx := range sortedPrefixes(routes) {
			if fam(pfx) != i {
				continue
			}
			fmt.Fprintf(&b, "  route %s blackhole;\n", pfx)
			if nh := routes[pfx]; nh.IsValid() {
				fmt.Fprintf(&filters[i], "  if net = %s then bgp_next_hop = %s;\n", pfx, nh)
			}
		}
		b.WriteString("}\n")
		fmt.Fprintf(&b, "filter out%d {\n%s  if source = RTS_STATIC then accept;\n  reject;\n}\n", 4+2*i, filters[i].String())
	}
	fmt.Fprintf(&b, "protocol bfd {\n  interface %q { min rx interval 300 ms; min tx interval 300 ms; multiplier 3; };\n}\n", lab.TorLink)
	for i, nb := range [][2]netip.Addr{{lab.TorIPv4, lab.NodeIPv4}, {lab.TorIPv6, lab.NodeIPv6}} {
		name := lab.BIRDProtocol
		if i == 1 {
			name += "v6"
		}
		fmt.Fprintf(&b, `protocol bgp %s {
  local %s as 65001;
  neighbor %s as 65010;
  hold time %d; keepalive time 2; connect retry time 1;
  error wait time 1, 5;
  passive on;
`, name, nb[0], nb[1], int(mxHold.Seconds()))
		if p.gr {
			b.WriteString("  graceful restart on;\n")
		}
		if p.bfd {
			b.WriteString("  bfd on;\n")
		}
		fmt.Fprintf(&b, "  %s { import all; export filter out%d; };\n}\n", mxFamilies[i], 4+2*i)
	}
	return b.String()
}

func (p *mxBIRD) configure(routes mxRoutes) error {
	if err := p.b.WriteConfig(p.render(p.b.Dir, routes)); err != nil {
		return err
	}
	out, err := p.b.Birdc("configure")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Reconfigured") && !strings.Contains(out, "Reconfiguration in progress") {
		return fmt.Errorf("birdc configure: %s", out)
	}
	return nil
}

func (p *mxBIRD) announce(routes mxRoutes) error { return p.configure(routes) }

func (p *mxBIRD) notify() error {
	for _, name := range []string{lab.BIRDProtocol, lab.BIRDProtocol + "v6"} {
		if _, err := p.b.Birdc("restart " + name); err != nil {
			return err
		}
	}
	return nil
}

func (p *mxBIRD) bfdOn() error {
	p.bfd = true
	return p.configure(p.w.routes)
}

func (p *mxBIRD) grRestart(routes mxRoutes, whileDown func()) error {
	if err := p.b.Kill(); err != nil {
		return err
	}
	whileDown()
	if err := p.b.WriteConfig(p.render(p.b.Dir, routes)); err != nil {
		return err
	}
	return p.b.StartRecovery()
}

// --- gobgpd ---

// mxGoBGP: `gobgp global rib add|del PREFIX [nexthop N] -a FAMILY`.
type mxGoBGP struct {
	g   *lab.GoBGP
	cur mxRoutes
}

func startMxGoBGP(w *mxWorld, routes mxRoutes) mxPeer {
	p := &mxGoBGP{cur: mxRoutes{}}
	p.g = w.l.StartGoBGP(w.l.Tor, lab.GoBGPConfig{ASN: 65001, HoldTime: int(mxHold.Seconds()), Keepalive: 2,
		Neighbors: []lab.GoBGPNeighbor{{Address: lab.NodeIPv4, ASN: 65010}, {Address: lab.NodeIPv6, ASN: 65010}}})
	if err := p.announce(routes); err != nil {
		w.t.Fatalf("gobgpd: %v", err)
	}
	return p
}

func (p *mxGoBGP) announce(routes mxRoutes) error {
	for _, pfx := range sortedPrefixes(p.cur) {
		if _, ok := routes[pfx]; !ok {
			if _, err := p.g.CLI("global", "rib", "del", pfx.String(), "-a", mxFamilies[fam(pfx)]); err != nil {
				return err
			}
		}
	}
	for _, pfx := range sortedPrefixes(routes) {
		old, had := p.cur[pfx]
		if had && old == routes[pfx] {
			continue
		}
		args := []string{"global", "rib", "add", pfx.String()}
		if nh := routes[pfx]; nh.IsValid() {
			args = append(args, "nexthop", nh.String())
		}
		if _, err := p.g.CLI(append(args, "-a", mxFamilies[fam(pfx)])...); err != nil {
			return err
		}
	}
	p.cur = routes.clone()
	return nil
}

func (p *mxGoBGP) notify() error {
	for _, a := range []netip.Addr{lab.NodeIPv4, lab.NodeIPv6} {
		if _, err := p.g.CLI("neighbor", a.String(), "reset"); err != nil {
			return err
		}
	}
	return nil
}

func (p *mxGoBGP) bfdOn() error { return fmt.Errorf("gobgpd has no BFD") }

func (p *mxGoBGP) grRestart(mxRoutes, func()) error {
	return fmt.Errorf("gobgpd runs without graceful restart")
}

// --- ExaBGP ---

// mxExa: `announce route P next-hop N`, `withdraw route P next-hop N`,
// `neighbor X teardown 2` (a Cease NOTIFICATION, Administrative Shutdown).
type mxExa struct {
	w   *mxWorld
	e   *lab.ExaBGP
	cur mxRoutes
}

func startMxExa(w *mxWorld, routes mxRoutes) mxPeer {
	p := &mxExa{w: w, cur: mxRoutes{}}
	p.e = w.l.StartExaBGP(lab.ExaConfig{IPv6: true, NoEndOfRIB: true})
	if err := p.announce(routes); err != nil {
		w.t.Fatalf("exabgp: %v", err)
	}
	return p
}

func (p *mxExa) announce(routes mxRoutes) error {
	var cmds []string
	for _, pfx := range sortedPrefixes(p.cur) {
		if _, ok := routes[pfx]; !ok {
			cmds = append(cmds, fmt.Sprintf("withdraw route %s next-hop %s", pfx, p.w.nh(pfx, p.cur[pfx])))
		}
	}
	for _, pfx := range sortedPrefixes(routes) {
		old, had := p.cur[pfx]
		if had && old == routes[pfx] {
			continue
		}
		cmds = append(cmds, fmt.Sprintf("announce route %s next-hop %s", pfx, p.w.nh(pfx, routes[pfx])))
	}
	if len(cmds) > 0 {
		if err := p.e.Send(cmds...); err != nil {
			return err
		}
	}
	p.cur = routes.clone()
	return nil
}

func (p *mxExa) notify() error {
	return p.e.Send("neighbor "+lab.NodeExtIPv4.Addr().String()+" teardown 2",
		"neighbor "+lab.NodeExtIPv6.Addr().String()+" teardown 2")
}

func (p *mxExa) bfdOn() error { return fmt.Errorf("ExaBGP has no BFD") }

func (p *mxExa) grRestart(mxRoutes, func()) error {
	return fmt.Errorf("ExaBGP runs without graceful restart")
}
