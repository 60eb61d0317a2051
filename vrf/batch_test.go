package vrf_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/vrf"
)

var equateIP = cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})

// many returns n routes in table 100 (IPv4 /24s, and every fourth an IPv6
// /64), multipath on every third, via hops.
func many(n int, v4, v6 []model.NextHop) []model.KernelRoute {
	var out []model.KernelRoute
	for i := range n {
		var r model.KernelRoute
		if i%4 == 3 {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x70, 0, byte(i >> 8), byte(i)})
			r = route(100, netip.PrefixFrom(a, 64).String(), v6[0])
			if i%3 == 0 {
				r.NextHops = v6
			}
		} else {
			a := netip.AddrFrom4([4]byte{10, byte(100 + i>>16), byte(i >> 8), byte(i)})
			r = route(100, netip.PrefixFrom(a, 32).String(), v4[0])
			if i%3 == 0 {
				r.NextHops = v4
			}
		}
		out = append(out, r)
	}
	return out
}

// TestBatchedApply: 10k adds, then 10k replaces (single to multipath and
// back), then 10k deletes, each in one Apply (about 40 batches): the kernel
// read with iproute2 equals the expectation, every operation is reported
// applied, and the foreign routes are byte-identical.
func TestBatchedApply(t *testing.T) {
	n := newNS(t)
	addForeign(n)
	before := n.foreign()
	m := n.open(nil)
	tables := []uint32{100}

	routes := many(10_000, []model.NextHop{hop("192.0.2.2", "a0"), hop("198.51.100.2", "b0")},
		[]model.NextHop{hop("2001:db8:a::2", "a0"), hop("2001:db8:b::2", "b0")})
	replaced := many(10_000, []model.NextHop{hop("198.51.100.3", "b0"), hop("192.0.2.3", "a0"), hop("192.0.2.4", "a0")},
		[]model.NextHop{hop("2001:db8:b::3", "b0"), hop("2001:db8:a::3", "a0")})
	var adds, reps, dels []model.KernelOp
	for i := range routes {
		adds = append(adds, add(routes[i]))
		reps = append(reps, rep(replaced[i]))
		dels = append(dels, del(replaced[i]))
	}
	for _, s := range []struct {
		name string
		ops  []model.KernelOp
		want []model.KernelRoute
	}{
		{"10k adds", adds, routes},
		{"10k replaces", reps, replaced},
		{"10k deletes", dels, nil},
	} {
		sends := vrf.Sends(m)
		applied, err := m.Apply(context.Background(), s.ops)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		// 10k requests in batches of up to 256: 40 sendmsg, not 10k.
		if got := vrf.Sends(m) - sends; got > 50 {
			t.Errorf("%s: %d sendmsg calls for %d operations, want batches (at most 50)", s.name, got, len(s.ops))
		}
		if diff := cmp.Diff(s.ops, applied, equateIP); diff != "" {
			t.Fatalf("%s: applied differs from the operations (-ops +applied):\n%s", s.name, diff)
		}
		got := n.kernel(tables)
		// table 100 also holds foreign routes: keep ours only.
		if diff := cmp.Diff(s.want, got.routes(), sortRoutes); diff != "" {
			t.Fatalf("%s: kernel (-want +got):\n%s", s.name, diff)
		}
		if after := n.foreign(); after != before {
			t.Fatalf("%s: foreign routes changed:\nbefore:\n%s\nafter:\n%s", s.name, before, after)
		}
	}
}

// TestBatchFailuresInTheMiddle: in one batch of 600 adds, one onto a
// foreign key, one naming a device that does not exist, and one whose
// gateway is not on-link (the kernel refuses it inside the batch): only
// those fail, each named, and every other operation is applied.
func TestBatchFailuresInTheMiddle(t *testing.T) {
	n := newNS(t)
	n.ip("route", "add", "10.9.0.0/16", "via", "192.0.2.2", "table", "100", "proto", "static")
	before := n.foreign()
	m := n.open(nil)
	routes := many(600, []model.NextHop{hop("192.0.2.2", "a0")}, []model.NextHop{hop("2001:db8:a::2", "a0")})
	var ops []model.KernelOp
	var want []model.KernelOp
	bad := map[int]model.KernelOp{
		100: add(route(100, "10.9.0.0/16", hop("192.0.2.3", "a0"))),
		300: add(route(100, "10.11.0.0/16", hop("192.0.2.3", "nosuchdev"))),
		500: add(route(100, "10.12.0.0/16", hop("203.0.113.1", "a0"))),
	}
	for i, r := range routes {
		if op, ok := bad[i]; ok {
			ops = append(ops, op)
			continue
		}
		ops = append(ops, add(r))
		want = append(want, add(r))
	}
	applied, err := m.Apply(context.Background(), ops)
	if err == nil {
		t.Fatal("no error for the three bad operations")
	}
	for _, s := range []string{
		"table 100 already has 10.9.0.0/16 from protocol static: not ovnbgp's, left alone",
		`route 10.11.0.0/16 in table 100: next hop 192.0.2.3 dev nosuchdev: no device "nosuchdev"`,
		"add route 10.12.0.0/16 in table 100 via 203.0.113.1 dev a0:",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q:\n%v", s, err)
		}
	}
	if got := len(strings.Split(err.Error(), "\n")); got != 3 {
		t.Errorf("%d errors, want 3:\n%v", got, err)
	}
	if diff := cmp.Diff(want, applied, equateIP); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	var wantRoutes []model.KernelRoute
	for _, op := range want {
		wantRoutes = append(wantRoutes, *op.Route)
	}
	if diff := cmp.Diff(wantRoutes, n.kernel([]uint32{100}).routes(), sortRoutes); diff != "" {
		t.Errorf("kernel (-want +got):\n%s", diff)
	}
	if after := n.foreign(); after != before {
		t.Fatalf("foreign routes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestBatchLastOrAllFail: only the last request of a batch asks for an
// ack, so its failure, and a batch where every request fails, are the
// edge cases of reading the answers: the last of 256 adds refused (255
// applied, one error), then ten adds all refused (ten errors, none
// applied).
func TestBatchLastOrAllFail(t *testing.T) {
	n := newNS(t)
	m := n.open(nil)
	routes := many(256, []model.NextHop{hop("192.0.2.2", "a0")}, []model.NextHop{hop("2001:db8:a::2", "a0")})
	var ops, want []model.KernelOp
	for _, r := range routes[:255] {
		ops = append(ops, add(r))
		want = append(want, add(r))
	}
	ops = append(ops, add(route(100, "10.12.0.0/16", hop("203.0.113.1", "a0")))) // not on-link
	applied, err := m.Apply(context.Background(), ops)
	if err == nil || len(strings.Split(err.Error(), "\n")) != 1 || !strings.Contains(err.Error(), "10.12.0.0/16") {
		t.Fatalf("last request refused: error %v, want one, naming 10.12.0.0/16", err)
	}
	if diff := cmp.Diff(want, applied, equateIP); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	var bad []model.KernelOp
	for i := range 10 {
		bad = append(bad, add(route(100, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 13, byte(i), 0}), 24).String(), hop("203.0.113.1", "a0"))))
	}
	applied, err = m.Apply(context.Background(), bad)
	if err == nil || len(strings.Split(err.Error(), "\n")) != 10 || len(applied) != 0 {
		t.Fatalf("ten refused requests: %d applied, error %v; want none applied and ten errors", len(applied), err)
	}
	var wantRoutes []model.KernelRoute
	for _, op := range want {
		wantRoutes = append(wantRoutes, *op.Route)
	}
	if diff := cmp.Diff(wantRoutes, n.kernel([]uint32{100}).routes(), sortRoutes); diff != "" {
		t.Errorf("kernel (-want +got):\n%s", diff)
	}
}

// TestIPv6DeleteNamesOurMetric: an IPv6 delete removes our route (metric
// 1024), not a lower-metric route of our protocol someone added by hand
// at the same prefix, and that hand-made route is left alone.
func TestIPv6DeleteNamesOurMetric(t *testing.T) {
	n := newNS(t)
	m := n.open(nil)
	ours := route(100, "2001:db8:60::/48", hop("2001:db8:a::2", "a0"))
	if _, err := m.Apply(context.Background(), []model.KernelOp{add(ours)}); err != nil {
		t.Fatal(err)
	}
	n.ip("-6", "route", "add", "2001:db8:60::/48", "via", "2001:db8:a::3", "dev", "a0", "table", "100", "proto", "200", "metric", "100")
	if _, err := m.Apply(context.Background(), []model.KernelOp{del(ours)}); err != nil {
		t.Fatal(err)
	}
	got := n.ip("-6", "route", "show", "table", "100", "2001:db8:60::/48")
	if strings.Contains(got, "metric 1024") || !strings.Contains(got, "metric 100") {
		t.Fatalf("after deleting ours, table 100 has:\n%s\nwant only the hand-made route at metric 100", got)
	}
}
