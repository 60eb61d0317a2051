package doctor

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
)

// sysctl reads the /proc/sys value at the path made of parts ("net",
// "ipv4", "ip_forward"). The parts are joined as given, not split on
// dots: a device name keeps its dots (proc/sys/net/ipv4/conf/bond0.100).
func sysctl(fsys fs.FS, parts ...string) (int, error) {
	b, err := fs.ReadFile(fsys, path.Join(append([]string{"proc/sys"}, parts...)...))
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", sysctlKey(parts...), strings.TrimSpace(string(b)))
	}
	return n, nil
}

// sysctlKey is the key sysctl(8) takes for the /proc/sys path made of
// parts: the parts joined with dots, and a dot inside a part (a VLAN
// device, bond0.100) written as "/", which sysctl(8) turns back into a dot
// ("net.ipv4.conf.bond0/100.rp_filter").
func sysctlKey(parts ...string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = strings.ReplaceAll(p, ".", "/")
	}
	return strings.Join(out, ".")
}

// families are the address families of the configured sessions.
func families(c *config.Config) (v4, v6 bool) {
	for _, p := range c.BGP.Peers {
		for _, f := range p.Families {
			v4 = v4 || f == config.IPv4
			v6 = v6 || f == config.IPv6
		}
		if len(p.Families) == 0 && p.Unnumbered() {
			// both by default over the IPv6 session (issue 20)
			v4, v6 = true, true
		} else if len(p.Families) == 0 {
			v4, v6 = v4 || p.Address.Is4(), v6 || p.Address.Is6()
		}
	}
	return v4, v6
}

// checkForwarding: the node forwards the families it routes (pod traffic
// to and from the peers, imported routes): net.ipv4.ip_forward and
// net.ipv6.conf.all.forwarding.
func checkForwarding(_ context.Context, s *state) []Result {
	fsys := s.env.Files()
	v4, v6 := true, false
	if s.cfg != nil {
		v4, v6 = families(s.cfg)
	}
	var out []Result
	for _, f := range []struct {
		id     string
		parts  []string
		used   bool
		family string
	}{
		{"ipv4-forwarding", []string{"net", "ipv4", "ip_forward"}, v4, "IPv4"},
		{"ipv6-forwarding", []string{"net", "ipv6", "conf", "all", "forwarding"}, v6, "IPv6"},
	} {
		key := sysctlKey(f.parts...)
		if !f.used {
			out = append(out, skip(f.id, "no %s session configured", f.family))
			continue
		}
		fix := "sysctl -w " + key + "=1, and keep it in /etc/sysctl.d/ (OVN-Kubernetes nodes normally have it on)"
		switch n, err := sysctl(fsys, f.parts...); {
		case err != nil:
			out = append(out, warn(f.id, fix, "cannot read %s: %v", key, err))
		case n == 0:
			out = append(out, fail(f.id, fix, "%s is 0: the node does not forward %s (pod traffic to and from the peers is dropped)", key, f.family))
		default:
			out = append(out, pass(f.id, "%s is %d", key, n))
		}
	}
	return out
}

// checkRPFilter: strict reverse path filtering (rp_filter 1) on an uplink
// drops traffic that arrives on one uplink while the route back uses
// another, which ECMP over several uplinks and imported routes make
// normal. The uplinks are the devices the kernel routes the IPv4 peers
// through. The effective value is the larger of conf.all and conf.<dev>.
func checkRPFilter(_ context.Context, s *state) []Result {
	const id = "rp-filter"
	if s.cfg == nil {
		return needConfig(id)
	}
	type uplink struct {
		dev   string
		peers []string
	}
	var ups []uplink
	var out []Result
	var rt Routing
	for _, p := range s.cfg.BGP.Peers {
		if !p.Address.Is4() {
			continue
		}
		if rt == nil {
			var err error
			if rt, err = s.env.Routing(); err != nil {
				return []Result{warn(id, "run doctor as root on the node", "cannot read the routing tables: %v", err)}
			}
			defer rt.Close()
		}
		dev := p.Interface
		if dev == "" {
			d, err := rt.RouteTo(p.Address)
			if err != nil {
				out = append(out, warn(id, "add an address or route toward "+p.Address.String()+" on the node, or fix bgp.peers["+p.Name+"].address",
					"peer %s (%s) is unreachable from this node: %v", p.Name, p.Address, err))
				continue
			}
			dev = d
		}
		i := slices.IndexFunc(ups, func(u uplink) bool { return u.dev == dev })
		if i < 0 {
			ups = append(ups, uplink{dev: dev})
			i = len(ups) - 1
		}
		ups[i].peers = append(ups[i].peers, p.Name)
	}
	if len(ups) == 0 && len(out) == 0 {
		return []Result{skip(id, "no IPv4 peer (rp_filter is IPv4 only)")}
	}
	fsys := s.env.Files()
	all, errAll := sysctl(fsys, "net", "ipv4", "conf", "all", "rp_filter")
	asymmetric := len(ups) > 1 || len(s.cfg.Import) > 0
	why := "ECMP over several uplinks"
	if len(ups) <= 1 {
		why = "imported routes"
	}
	for _, u := range ups {
		dev, err := sysctl(fsys, "net", "ipv4", "conf", u.dev, "rp_filter")
		if err != nil || errAll != nil {
			out = append(out, warn(id, "run doctor as root on the node", "cannot read rp_filter of %s: %v", u.dev, firstErr(errAll, err)))
			continue
		}
		eff := max(all, dev)
		what := fmt.Sprintf("uplink %s (peers %s): rp_filter %d (all %d, %s %d)", u.dev, strings.Join(u.peers, ", "), eff, all, u.dev, dev)
		fix := "sysctl -w net.ipv4.conf.all.rp_filter=2 " + sysctlKey("net", "ipv4", "conf", u.dev, "rp_filter") + "=2 (loose), and keep it in /etc/sysctl.d/"
		switch {
		case eff == 1 && asymmetric && len(ups) > 1:
			out = append(out, fail(id, fix, "%s is strict, and %s make asymmetric paths: replies arriving on another uplink are dropped", what, why))
		case eff == 1 && asymmetric:
			out = append(out, warn(id, fix, "%s is strict, and %s can make asymmetric paths", what, why))
		default:
			out = append(out, pass(id, "%s", what))
		}
	}
	return out
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
