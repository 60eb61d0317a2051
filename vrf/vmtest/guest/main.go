// Command guest is the /init of the VM test of package vrf (see
// ../vm_test.go): it runs as PID 1 of a Debian kernel booted by qemu, loads
// vrf.ko and dummy.ko, checks the kernel target against real VRF devices,
// prints one line per check and a verdict line to the console, and powers
// the VM off. It sets up its fixtures with netlink directly (this kernel is
// the test's, not a host's).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
	"github.com/ovnbgp/ovnbgp/vrf"
)

const proto = 200

func main() {
	failed := run()
	fmt.Printf("vmtest: VERDICT %s\n", map[bool]string{true: "FAIL", false: "PASS"}[failed > 0])
	if os.Getpid() == 1 {
		unix.Sync()
		_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// run sets up the VM and runs the checks; it returns how many failed.
func run() int {
	if err := setup(); err != nil {
		fmt.Printf("vmtest: FAIL setup: %v\n", err)
		return 1
	}
	m, err := vrf.Open(proto, zap.NewNop(), func() {})
	if err != nil {
		fmt.Printf("vmtest: FAIL open: %v\n", err)
		return 1
	}
	defer m.Close()
	e := &env{m: m}
	failed := 0
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"fixtures", e.fixtures},
		{"adopt-existing-vrf", e.adopt},
		{"create-missing-vrf", e.create},
		{"refuse-vrf-with-other-table", e.otherTable},
		{"refuse-table-of-another-vrf", e.tableTaken},
		{"refuse-device-that-is-not-a-vrf", e.notVRF},
		{"routes-in-vrf-table", e.routes},
		{"notify-on-route-deleted-in-vrf", e.notify},
		{"vrf-never-deleted", e.neverDeleted},
		{"foreign-vrf-untouched", e.foreignUntouched},
	} {
		start := time.Now()
		if err := guard(c.fn); err != nil {
			failed++
			fmt.Printf("vmtest: FAIL %s: %s\n", c.name, strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		fmt.Printf("vmtest: PASS %s (%s)\n", c.name, time.Since(start).Round(time.Millisecond))
	}
	return failed
}

// guard runs a check, turning a panic into its error: PID 1 must not die
// before it prints the verdict.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// setup mounts proc and sys, loads the modules shipped in /modules and
// brings lo up.
func setup() error {
	if os.Getpid() == 1 {
		for _, mnt := range []struct{ src, dst, fs string }{{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}} {
			_ = os.MkdirAll(mnt.dst, 0o755)
			if err := unix.Mount(mnt.src, mnt.dst, mnt.fs, 0, ""); err != nil {
				return fmt.Errorf("mount %s: %w", mnt.dst, err)
			}
		}
	}
	mods, _ := filepath.Glob("/modules/*.ko")
	for _, mod := range mods {
		f, err := os.Open(mod)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load %s: %w", mod, err)
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	return netlink.LinkSetUp(lo)
}

type env struct {
	m *vrf.Manager
	// foreign is the state of what ovnbgp must never touch, read after
	// the fixtures: VRF red, its table's routes, device green.
	foreign string
}

func apply(m *vrf.Manager, ops ...model.KernelOp) ([]model.KernelOp, error) {
	return m.Apply(context.Background(), ops)
}

func addLink(l netlink.Link, addrs ...string) error {
	if err := netlink.LinkAdd(l); err != nil {
		return fmt.Errorf("add %s: %w", l.Attrs().Name, err)
	}
	for _, a := range addrs {
		ip, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		ip.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, ip); err != nil {
			return fmt.Errorf("address %s on %s: %w", a, l.Attrs().Name, err)
		}
	}
	return netlink.LinkSetUp(l)
}

func cidr(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// fixtures: VRF red (table 1001, an OVN-Kubernetes-like VRF ovnbgp did not
// make) with dummy r0 enslaved and a static route in its table; dummy d0
// and d1 (to be enslaved to blue) with addresses; dummy green (a device
// named like a VRF that is not one).
func (e *env) fixtures() error {
	red := &netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "red"}, Table: 1001}
	if err := addLink(red); err != nil {
		return err
	}
	r0 := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "r0", MasterIndex: red.Index}}
	if err := addLink(r0, "203.0.113.1/24", "2001:db8:f::1/64"); err != nil {
		return err
	}
	for _, d := range []struct{ name, v4, v6 string }{{"d0", "192.0.2.1/24", "2001:db8:a::1/64"}, {"d1", "198.51.100.1/24", "2001:db8:b::1/64"}} {
		if err := addLink(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: d.name}}, d.v4, d.v6); err != nil {
			return err
		}
	}
	if err := addLink(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "green"}}); err != nil {
		return err
	}
	for _, r := range []*netlink.Route{
		{Dst: cidr("10.60.0.0/16"), Gw: net.ParseIP("203.0.113.9"), LinkIndex: r0.Index, Table: 1001, Protocol: unix.RTPROT_STATIC},
		{Dst: cidr("10.50.0.0/16"), Gw: net.ParseIP("203.0.113.8"), LinkIndex: r0.Index, Table: 1001, Protocol: unix.RTPROT_BGP},
		{Dst: cidr("2001:db8:60::/48"), Gw: net.ParseIP("2001:db8:f::9"), LinkIndex: r0.Index, Table: 1001, Protocol: unix.RTPROT_STATIC},
	} {
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("foreign route %s: %w", r.Dst, err)
		}
	}
	f, err := foreignState()
	if err != nil {
		return err
	}
	e.foreign = f
	return nil
}

// foreignState renders VRF red, green and every route in table 1001.
func foreignState() (string, error) {
	var b strings.Builder
	for _, name := range []string{"red", "r0", "green"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		a := l.Attrs()
		fmt.Fprintf(&b, "link %s type %s index %d flags %v master %d", a.Name, l.Type(), a.Index, a.Flags, a.MasterIndex)
		if v, ok := l.(*netlink.Vrf); ok {
			fmt.Fprintf(&b, " table %d", v.Table)
		}
		b.WriteString("\n")
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 1001}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, r := range routes {
		lines = append(lines, r.String()+fmt.Sprintf(" proto %d type %d metric %d", r.Protocol, r.Type, r.Priority))
	}
	slices.Sort(lines)
	b.WriteString(strings.Join(lines, "\n"))
	return b.String(), nil
}

func (e *env) checkForeign() error {
	now, err := foreignState()
	if err != nil {
		return err
	}
	if now != e.foreign {
		return fmt.Errorf("foreign state changed:\nbefore:\n%s\nafter:\n%s", e.foreign, now)
	}
	return nil
}

func (e *env) adopt() error {
	applied, err := apply(e.m, model.KernelOp{Op: model.OpAdd, VRF: &model.VRFDevice{Name: "red", Table: 1001}})
	if err != nil {
		return fmt.Errorf("adopting red: %w", err)
	}
	if len(applied) != 0 {
		return fmt.Errorf("adopting red reported a change: %+v", applied)
	}
	host, err := e.m.Snapshot()
	if err != nil {
		return err
	}
	if !slices.Contains(host.VRFs, model.VRFDevice{Name: "red", Table: 1001}) {
		return fmt.Errorf("Snapshot VRFs %+v lack red/1001", host.VRFs)
	}
	for _, l := range host.Links {
		if l.Name == "r0" && l.Master != "red" {
			return fmt.Errorf("r0's master is %q, want red", l.Master)
		}
	}
	return e.checkForeign()
}

func (e *env) create() error {
	op := model.KernelOp{Op: model.OpAdd, VRF: &model.VRFDevice{Name: "blue", Table: 1002}}
	applied, err := apply(e.m, op)
	if err != nil {
		return err
	}
	if len(applied) != 1 {
		return fmt.Errorf("creating blue: applied %+v", applied)
	}
	l, err := netlink.LinkByName("blue")
	if err != nil {
		return err
	}
	v, ok := l.(*netlink.Vrf)
	if !ok || v.Table != 1002 || v.Flags&net.FlagUp == 0 {
		return fmt.Errorf("blue is %s table %v flags %v, want an up VRF on table 1002", l.Type(), v, l.Attrs().Flags)
	}
	// Again: now it exists, so it is adopted and nothing changes.
	if applied, err = apply(e.m, op); err != nil || len(applied) != 0 {
		return fmt.Errorf("second add of blue: applied %+v, err %v", applied, err)
	}
	host, err := e.m.Snapshot()
	if err != nil {
		return err
	}
	if !slices.Contains(host.VRFs, model.VRFDevice{Name: "blue", Table: 1002}) {
		return fmt.Errorf("Snapshot VRFs %+v lack blue/1002", host.VRFs)
	}
	return e.checkForeign()
}

func wantRefusal(m *vrf.Manager, op model.KernelOp, want string) error {
	applied, err := apply(m, op)
	if err == nil || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("error %v, want one saying %q", err, want)
	}
	if len(applied) != 0 {
		return fmt.Errorf("refused operation reported applied: %+v", applied)
	}
	return nil
}

func (e *env) otherTable() error {
	if err := wantRefusal(e.m, model.KernelOp{Op: model.OpAdd, VRF: &model.VRFDevice{Name: "red", Table: 1005}},
		"VRF red exists with table 1001: left alone"); err != nil {
		return err
	}
	return e.checkForeign()
}

func (e *env) tableTaken() error {
	if err := wantRefusal(e.m, model.KernelOp{Op: model.OpAdd, VRF: &model.VRFDevice{Name: "purple", Table: 1001}},
		"table 1001 already belongs to VRF red"); err != nil {
		return err
	}
	if _, err := netlink.LinkByName("purple"); err == nil {
		return errors.New("purple was created")
	}
	return e.checkForeign()
}

func (e *env) notVRF() error {
	if err := wantRefusal(e.m, model.KernelOp{Op: model.OpAdd, VRF: &model.VRFDevice{Name: "green", Table: 1003}},
		"device green exists and is a dummy, not a VRF: left alone"); err != nil {
		return err
	}
	return e.checkForeign()
}

func hop(addr, dev string) model.NextHop {
	return model.NextHop{Addr: netip.MustParseAddr(addr), Dev: dev}
}

// routes: d0 and d1 are enslaved to blue; routes (one named by VRF only,
// IPv4 and IPv6 multipath, one with the same destination as a foreign route
// in red's table) go into blue's table and read back with the VRF's name;
// then a random walk of desired states in table 1002; then all are deleted.
func (e *env) routes() error {
	blue, err := netlink.LinkByName("blue")
	if err != nil {
		return err
	}
	for _, d := range []string{"d0", "d1"} {
		l, err := netlink.LinkByName(d)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMasterByIndex(l, blue.Attrs().Index); err != nil {
			return fmt.Errorf("enslave %s to blue: %w", d, err)
		}
	}
	// Enslaving cycles the device down and up, which drops its IPv6
	// addresses (keep_addr_on_down is 0): put them back.
	for _, a := range []struct{ dev, addr string }{{"d0", "2001:db8:a::1/64"}, {"d1", "2001:db8:b::1/64"}} {
		l, err := netlink.LinkByName(a.dev)
		if err != nil {
			return err
		}
		ip, err := netlink.ParseAddr(a.addr)
		if err != nil {
			return err
		}
		ip.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrReplace(l, ip); err != nil {
			return fmt.Errorf("address %s on %s: %w", a.addr, a.dev, err)
		}
	}
	byVRF := model.KernelRoute{VRF: "blue", Prefix: netip.MustParsePrefix("10.50.0.0/16"),
		NextHops: []model.NextHop{hop("192.0.2.2", "d0")}, Protocol: proto}
	want := []model.KernelRoute{
		{Table: 1002, VRF: "blue", Prefix: netip.MustParsePrefix("10.50.0.0/16"), NextHops: byVRF.NextHops, Protocol: proto},
		{Table: 1002, VRF: "blue", Prefix: netip.MustParsePrefix("10.51.0.0/16"),
			NextHops: []model.NextHop{hop("192.0.2.2", "d0"), hop("198.51.100.2", "d1")}, Protocol: proto},
		{Table: 1002, VRF: "blue", Prefix: netip.MustParsePrefix("2001:db8:51::/48"),
			NextHops: []model.NextHop{hop("2001:db8:a::2", "d0"), hop("2001:db8:b::2", "d1")}, Protocol: proto},
	}
	ops := []model.KernelOp{{Op: model.OpAdd, Route: &byVRF}}
	for i := range want[1:] {
		ops = append(ops, model.KernelOp{Op: model.OpAdd, Route: &want[1+i]})
	}
	if applied, err := apply(e.m, ops...); err != nil || len(applied) != len(ops) {
		return fmt.Errorf("adding routes to blue: applied %d of %d, err %v", len(applied), len(ops), err)
	}
	if err := e.readBack(want); err != nil {
		return err
	}
	host, err := e.m.Snapshot()
	if err != nil {
		return err
	}
	for _, l := range host.Links {
		if (l.Name == "d0" || l.Name == "d1") && l.Master != "blue" {
			return fmt.Errorf("%s's master is %q, want blue", l.Name, l.Master)
		}
	}
	// A short walk of desired states inside the VRF's table.
	v4 := []string{"10.50.0.0/16", "10.51.0.0/16", "10.52.0.0/24", "0.0.0.0/0"}
	v6 := []string{"2001:db8:51::/48", "2001:db8:52::/64", "::/0"}
	h4 := []model.NextHop{hop("192.0.2.2", "d0"), hop("192.0.2.3", "d0"), hop("198.51.100.2", "d1")}
	h6 := []model.NextHop{hop("2001:db8:a::2", "d0"), hop("2001:db8:b::2", "d1"), hop("2001:db8:b::3", "d1")}
	for step := range 40 {
		var desired []model.KernelRoute
		for i, p := range v4 {
			if (step+i)%3 != 0 {
				desired = append(desired, model.KernelRoute{Table: 1002, VRF: "blue", Prefix: netip.MustParsePrefix(p),
					NextHops: h4[:1+(step+i)%len(h4)], Protocol: proto})
			}
		}
		for i, p := range v6 {
			if (step+2*i)%4 != 0 {
				desired = append(desired, model.KernelRoute{Table: 1002, VRF: "blue", Prefix: netip.MustParsePrefix(p),
					NextHops: h6[(step+i)%2 : 1+(step+i)%2+step%2], Protocol: proto})
			}
		}
		host, err := e.m.Snapshot()
		if err != nil {
			return err
		}
		ops := plan.DiffKernel(desired, host.Routes)
		if applied, err := apply(e.m, ops...); err != nil || len(applied) != len(ops) {
			return fmt.Errorf("walk step %d: applied %d of %d, err %v", step, len(applied), len(ops), err)
		}
		if err := e.readBack(desired); err != nil {
			return fmt.Errorf("walk step %d: %w", step, err)
		}
		if err := e.checkForeign(); err != nil {
			return fmt.Errorf("walk step %d: %w", step, err)
		}
	}
	return nil
}

func (e *env) readBack(want []model.KernelRoute) error {
	host, err := e.m.Snapshot()
	if err != nil {
		return err
	}
	if left := plan.DiffKernel(want, host.Routes); len(left) != 0 || len(host.Routes) != len(want) {
		return fmt.Errorf("Snapshot routes %+v, want %+v (%d operations left)", host.Routes, want, len(left))
	}
	for _, r := range host.Routes {
		if r.VRF != "blue" || r.Table != 1002 {
			return fmt.Errorf("route %s read back in table %d vrf %q, want 1002 blue", r.Prefix, r.Table, r.VRF)
		}
	}
	return nil
}

// notify: a fresh manager (it sees only changes made after Open, none
// left over from the checks before) is told when a route of ours in the
// VRF's table is deleted by hand.
func (e *env) notify() error {
	pokes := make(chan struct{}, 1)
	m, err := vrf.Open(proto, zap.NewNop(), func() {
		select {
		case pokes <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer m.Close()
	host, err := m.Snapshot()
	if err != nil {
		return err
	}
	if len(host.Routes) == 0 {
		return errors.New("no route of ours in blue to delete")
	}
	victim := host.Routes[0]
	if err := netlink.RouteDel(&netlink.Route{Dst: &net.IPNet{IP: victim.Prefix.Addr().AsSlice(),
		Mask: net.CIDRMask(victim.Prefix.Bits(), victim.Prefix.Addr().BitLen())}, Table: 1002, Protocol: proto}); err != nil {
		return fmt.Errorf("delete %s by hand: %w", victim.Prefix, err)
	}
	select {
	case <-pokes:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no notify within 30s after %s was deleted by hand", victim.Prefix)
	}
}

func (e *env) neverDeleted() error {
	for _, name := range []string{"blue", "red"} {
		if err := wantRefusal(e.m, model.KernelOp{Op: model.OpDelete, VRF: &model.VRFDevice{Name: name, Table: 1001}},
			"never changes or deletes"); err != nil {
			return err
		}
	}
	// Delete every route of ours, in blue's table and (same prefixes as
	// red's foreign routes) in red's: blue stays, red's routes stay.
	host, err := e.m.Snapshot()
	if err != nil {
		return err
	}
	ops := plan.DiffKernel(nil, host.Routes)
	for _, p := range []string{"10.60.0.0/16", "10.50.0.0/16", "2001:db8:60::/48"} {
		r := model.KernelRoute{Table: 1001, Prefix: netip.MustParsePrefix(p), Protocol: proto}
		ops = append(ops, model.KernelOp{Op: model.OpDelete, Route: &r})
	}
	applied, err := apply(e.m, ops...)
	if err != nil {
		return err
	}
	if len(applied) != len(host.Routes) {
		return fmt.Errorf("deleted %d routes, want %d (ours only)", len(applied), len(host.Routes))
	}
	if host, err = e.m.Snapshot(); err != nil || len(host.Routes) != 0 {
		return fmt.Errorf("after deleting: routes %+v, err %v", host.Routes, err)
	}
	for _, name := range []string{"blue", "red"} {
		if _, err := netlink.LinkByName(name); err != nil {
			return fmt.Errorf("VRF %s is gone: %w", name, err)
		}
	}
	return e.checkForeign()
}

func (e *env) foreignUntouched() error {
	// Adding onto red's foreign keys is refused.
	r := model.KernelRoute{VRF: "red", Prefix: netip.MustParsePrefix("10.60.0.0/16"),
		NextHops: []model.NextHop{hop("203.0.113.7", "r0")}, Protocol: proto}
	if err := wantRefusal(e.m, model.KernelOp{Op: model.OpAdd, Route: &r},
		"table 1001 already has 10.60.0.0/16 from protocol static: not ovnbgp's, left alone"); err != nil {
		return err
	}
	return e.checkForeign()
}
