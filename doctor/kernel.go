package doctor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
)

// ovnkTableStart is where OVN-Kubernetes starts numbering the routing
// tables it creates: its UDN VRFs (routingTableIDStart + the management
// port's link index, or + the network ID on DPU nodes) and its egress IP
// multi-NIC tables (1000 + link index). EVPN parent VRFs use 1000000+.
const ovnkTableStart = 1000

// Well-known route protocols (rtnetlink.h, /etc/iproute2/rt_protos and
// FRR's rt_protos.d/frr.conf).
func protocolOwner(p int) (owner string, routingDaemon bool) {
	switch {
	case p == 2:
		return "the kernel", false
	case p == 3:
		return "an operator (boot: `ip route add`)", false
	case p == 4:
		return "an operator (static)", false
	case p == 84:
		return "OVN", true
	case p == 85:
		return "OVN-Kubernetes", true
	case p == 186:
		return "FRR's bgpd (bgp)", true
	case p >= 187 && p <= 198:
		return "FRR's zebra", true
	}
	return fmt.Sprintf("protocol %d", p), true
}

// checkVRFSupport: a kernel target that names a VRF needs the kernel's
// VRF driver: loaded (/sys/module/vrf), built in (modules.builtin) or
// loadable (modules.dep) for the running kernel.
func checkVRFSupport(_ context.Context, s *state) []Result {
	const id = "vrf-support"
	if s.cfg == nil {
		return needConfig(id)
	}
	var vrfs []string
	create := map[string]bool{}
	for _, r := range s.cfg.Import {
		if v := r.Targets.Kernel.VRF; v != "" {
			if !slices.Contains(vrfs, v) {
				vrfs = append(vrfs, v)
			}
			create[v] = create[v] || r.Targets.Kernel.CreateVRF
		}
	}
	if len(vrfs) == 0 {
		return []Result{skip(id, "no import rule has a kernel VRF target")}
	}
	fsys := s.env.Files()
	var exist []model.VRFDevice
	if rt, err := s.env.Routing(); err == nil {
		exist, _ = rt.VRFs()
		rt.Close()
	}
	driver, derr := vrfDriver(fsys)
	var out []Result
	for _, v := range vrfs {
		i := slices.IndexFunc(exist, func(d model.VRFDevice) bool { return d.Name == v })
		switch {
		case i >= 0:
			out = append(out, pass(id, "VRF %s exists (table %d)", v, exist[i].Table))
		case driver == "":
			fix := "install the running kernel's vrf module (RHCOS and RHEL: it is in kernel-modules; Debian: linux-image-*), or use targets.kernel.table without vrf"
			msg := "the kernel has no VRF driver"
			if derr != nil {
				msg += " (" + derr.Error() + ")"
			}
			out = append(out, fail(id, fix, "VRF %s does not exist and %s", v, msg))
		case !create[v]:
			out = append(out, fail(id, "create it (`ip link add "+v+" type vrf table N && ip link set "+v+" up`), or set targets.kernel.createVRF: true",
				"VRF %s does not exist and no import rule creates it (createVRF: false); the kernel's VRF driver is %s", v, driver))
		default:
			out = append(out, pass(id, "VRF %s will be created (createVRF); the kernel's VRF driver is %s", v, driver))
		}
	}
	return out
}

// vrfDriver says how the running kernel provides VRF devices: "loaded",
// "built in" or "loadable", or "" with the reason.
func vrfDriver(fsys fs.FS) (string, error) {
	if _, err := fs.Stat(fsys, "sys/module/vrf"); err == nil {
		return "loaded", nil
	}
	rel, err := fs.ReadFile(fsys, "proc/sys/kernel/osrelease")
	if err != nil {
		return "", fmt.Errorf("kernel release unknown: %w", err)
	}
	dir := path.Join("lib/modules", strings.TrimSpace(string(rel)))
	if hasModule(fsys, path.Join(dir, "modules.builtin")) {
		return "built in", nil
	}
	if hasModule(fsys, path.Join(dir, "modules.dep")) {
		return "loadable (modprobe vrf)", nil
	}
	return "", fmt.Errorf("vrf is neither loaded, built in, nor in /%s/modules.dep", dir)
}

// hasModule: a modules.builtin or modules.dep line names vrf.ko (possibly
// compressed: vrf.ko.xz).
func hasModule(fsys fs.FS, file string) bool {
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), ":")
		base := path.Base(strings.TrimSpace(name))
		if base == "vrf.ko" || strings.HasPrefix(base, "vrf.ko.") {
			return true
		}
	}
	return false
}

// rtProtoFiles are iproute2's protocol name files, in the order ip reads
// them (the /usr/share ones are the defaults of newer iproute2).
func rtProtoNames(fsys fs.FS) map[int][]string {
	names := map[int][]string{}
	read := func(file string) {
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			n, err := strconv.Atoi(f[0])
			if err != nil {
				if n64, err2 := strconv.ParseInt(f[0], 0, 32); err2 == nil {
					n = int(n64)
				} else {
					continue
				}
			}
			names[n] = append(names[n], f[1]+" (/"+file+")")
		}
	}
	for _, dir := range []string{"usr/share/iproute2", "etc/iproute2"} {
		read(path.Join(dir, "rt_protos"))
		ents, _ := fs.ReadDir(fsys, path.Join(dir, "rt_protos.d"))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".conf") {
				read(path.Join(dir, "rt_protos.d", e.Name()))
			}
		}
	}
	return names
}

// checkRouteProtocol: kernel.routeProtocol is not a number another daemon
// names in iproute2's rt_protos files (the validator already refuses the
// well-known ones: the kernel's, OVN's, OVN-Kubernetes', FRR's 186-198).
func checkRouteProtocol(_ context.Context, s *state) []Result {
	const id = "route-protocol"
	if s.cfg == nil {
		return needConfig(id)
	}
	n := s.cfg.Kernel.RouteProtocol
	names := rtProtoNames(s.env.Files())
	var foreign, ours []string
	for _, name := range names[n] {
		if strings.HasPrefix(name, "ovnbgp ") {
			ours = append(ours, name)
		} else {
			foreign = append(foreign, name)
		}
	}
	switch {
	case len(foreign) > 0:
		return []Result{fail(id, "set kernel.routeProtocol to a number no other daemon uses (`cat /etc/iproute2/rt_protos /etc/iproute2/rt_protos.d/*`)",
			"kernel.routeProtocol %d is named %s: another routing daemon marks its routes with it", n, strings.Join(foreign, ", "))}
	case len(ours) > 0:
		return []Result{pass(id, "kernel.routeProtocol %d is named %s", n, ours[0])}
	}
	for p, ns := range names {
		for _, name := range ns {
			if strings.HasPrefix(name, "ovnbgp ") && p != n {
				return []Result{warn(id, fmt.Sprintf("write %d in that file, or set kernel.routeProtocol: %d", n, p),
					"kernel.routeProtocol is %d, but %s names %d: `ip route` shows ovnbgp's routes with the wrong name", n, name, p)}
			}
		}
	}
	return []Result{pass(id, "kernel.routeProtocol %d is free (install packaging/rt_protos.d/ovnbgp.conf as /etc/iproute2/rt_protos.d/ovnbgp.conf so `ip route` names it)", n)}
}

// checkTables: every kernel table an import rule writes belongs to ovnbgp
// alone: no other VRF device uses it, no routing daemon has routes in it,
// and it is outside the range OVN-Kubernetes numbers its own tables from.
func checkTables(_ context.Context, s *state) []Result {
	const id = "kernel-tables"
	if s.cfg == nil {
		return needConfig(id)
	}
	type target struct {
		table uint32
		vrf   string
		rules []string
	}
	var ts []target
	for _, r := range s.cfg.Import {
		k := r.Targets.Kernel
		if k.Table == 0 && k.VRF == "" {
			continue
		}
		i := slices.IndexFunc(ts, func(t target) bool { return t.table == uint32(k.Table) && t.vrf == k.VRF })
		if i < 0 {
			ts = append(ts, target{table: uint32(k.Table), vrf: k.VRF})
			i = len(ts) - 1
		}
		ts[i].rules = append(ts[i].rules, r.Name)
	}
	if len(ts) == 0 {
		return []Result{skip(id, "no import rule has a kernel target")}
	}
	rt, err := s.env.Routing()
	if err != nil {
		return []Result{warn(id, "run doctor as root on the node", "cannot read the routing tables: %v", err)}
	}
	defer rt.Close()
	vrfs, err := rt.VRFs()
	if err != nil {
		return []Result{warn(id, "run doctor as root on the node", "cannot list VRF devices: %v", err)}
	}
	proto := s.cfg.Kernel.RouteProtocol
	var out []Result
	for _, t := range ts {
		where := fmt.Sprintf("table %d", t.table)
		if t.vrf != "" {
			where = "VRF " + t.vrf
			if i := slices.IndexFunc(vrfs, func(v model.VRFDevice) bool { return v.Name == t.vrf }); i >= 0 {
				if t.table != 0 && vrfs[i].Table != t.table {
					out = append(out, fail(id, fmt.Sprintf("set targets.kernel.table: %d in import rules %s, or drop it", vrfs[i].Table, strings.Join(t.rules, ", ")),
						"VRF %s uses table %d, but import rules %s say table %d", t.vrf, vrfs[i].Table, strings.Join(t.rules, ", "), t.table))
					continue
				}
				t.table = vrfs[i].Table
			}
			where += fmt.Sprintf(" (table %d)", t.table)
		}
		if t.table == 0 {
			out = append(out, pass(id, "%s does not exist yet: nothing to clash with", where))
			continue
		}
		var problems []Result
		for _, v := range vrfs {
			if v.Table == t.table && v.Name != t.vrf {
				owner := "another VRF"
				if strings.HasPrefix(v.Name, "mp") && strings.HasSuffix(v.Name, "-udn-vrf") || t.table >= ovnkTableStart {
					owner = "an OVN-Kubernetes UDN VRF, probably"
				}
				problems = append(problems, fail(id, "pick another targets.kernel.table in import rules "+strings.Join(t.rules, ", "),
					"%s is the table of VRF %s (%s)", where, v.Name, owner))
			}
		}
		counts, err := rt.TableProtocols(t.table)
		if err != nil {
			problems = append(problems, warn(id, "run doctor as root on the node", "cannot list the routes of %s: %v", where, err))
		}
		var ps []int
		for p := range counts {
			if p != proto && p != 2 {
				ps = append(ps, p)
			}
		}
		slices.Sort(ps)
		for _, p := range ps {
			owner, daemon := protocolOwner(p)
			fix := "pick a table of ovnbgp's own in import rules " + strings.Join(t.rules, ", ")
			if daemon {
				problems = append(problems, fail(id, fix, "%s holds %d routes of %s (protocol %d): two routing daemons in one table", where, counts[p], owner, p))
			} else {
				problems = append(problems, warn(id, fix+", or move those routes", "%s holds %d routes of %s (protocol %d)", where, counts[p], owner, p))
			}
		}
		if t.vrf == "" && t.table >= ovnkTableStart {
			problems = append(problems, warn(id, "pick a table below 1000 in import rules "+strings.Join(t.rules, ", "),
				"%s is in the range OVN-Kubernetes numbers its UDN VRF and egress IP tables from (1000 + link index)", where))
		}
		if len(problems) == 0 {
			problems = append(problems, pass(id, "%s is ovnbgp's alone (%d routes of protocol %d)", where, counts[proto], proto))
		}
		out = append(out, problems...)
	}
	return out
}
