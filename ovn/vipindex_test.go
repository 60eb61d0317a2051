package ovn

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestVIPIndexRandom: after every step of a random sequence of load
// balancers added, changed and removed (VIPs shared by the rows of one
// Service and by several Services, on two networks; odd owners, template,
// masquerade and special-purpose keys, bad backends, rows sharing a
// name), the index holds exactly what buildServiceVIPs builds over all the
// rows, problems included, and the addresses it says changed are exactly
// those whose entries differ between the full builds before and after.
func TestVIPIndexRandom(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { vipIndexRandom(t, seed) })
	}
}

func vipIndexRandom(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	vips := []string{"172.30.0.1", "172.30.0.2", "172.30.0.3", "[fd00:30::1]", "[fd00:30::2]", "169.254.169.3", "127.0.0.1"}
	ports := []string{"80", "443", "53"}
	backs := []string{"10.128.0.5", "10.128.0.6", "10.129.0.7", "[fd00:10::5]", "169.254.169.2", "bogus", "10.128.0.8"}
	owners := []string{"ns1/web", "ns1/web", "ns2/db", "ns3/dns", "bad", "ns/a/b", ""}
	names := []string{"Service_ns1/web_TCP_cluster", "Service_ns1/web_UDP_cluster", "Service_ns2/db_TCP_cluster", "Service_shared"}
	networks := []string{"", "", "net1"}
	row := func(uuid string) *lbRow {
		n := r.IntN(4)
		vm := map[string]string{}
		for range n {
			var k string
			switch x := r.IntN(10); {
			case x == 0:
				k = "^NODEIP_IPv4_0:30080"
			case x == 1:
				k = "not-an-ip:80"
			case x < 5:
				k = pick(vips) // no port
			default:
				k = pick(vips) + ":" + pick(ports)
			}
			var bs []string
			for range r.IntN(4) {
				b := pick(backs)
				if r.IntN(3) > 0 {
					b += ":8080"
				}
				bs = append(bs, b)
			}
			vm[k] = joinComma(bs)
		}
		keys := slices.Sorted(maps.Keys(vm))
		values := make([]string, len(keys))
		for i, k := range keys {
			values[i] = vm[k]
		}
		return lbIn{UUID: uuid, Name: pick(names), Owner: pick(owners), Network: pick(networks), VIPs: keys, Backends: values}.row()
	}
	full := func(rows map[string]*lbRow) ([]model.ServiceVIP, []string) {
		lbs := slices.SortedFunc(maps.Values(rows), compareLB)
		vs, ps := buildServiceVIPs(lbs)
		slices.Sort(ps)
		return vs, ps
	}
	x := newVIPIndex()
	rows := map[string]*lbRow{}
	before, _ := full(rows)
	for step := range 300 {
		changes := map[string]*lbRow{}
		for range 1 + r.IntN(3) {
			uuid := fmt.Sprintf("u%d", r.IntN(12))
			if r.IntN(4) == 0 {
				changes[uuid] = nil
				delete(rows, uuid)
				continue
			}
			lb := row(uuid)
			changes[uuid] = lb
			rows[uuid] = lb
		}
		changed := x.apply(changes)
		after, problems := full(rows)
		if !reflect.DeepEqual(x.list, after) {
			t.Fatalf("step %d: the index holds\n%+v\nthe full build\n%+v", step, x.list, after)
		}
		if got := slices.Clip(x.probList); !slices.Equal(got, problems) {
			t.Fatalf("step %d: problems\n%q\nwant\n%q", step, got, problems)
		}
		lbs := slices.SortedFunc(maps.Values(rows), compareLB)
		wantProt := lbProtected(lbs)
		slices.Sort(wantProt.problems)
		if !reflect.DeepEqual(x.prot, append([]model.ProtectedPrefix{}, wantProt.prot...)) {
			t.Fatalf("step %d: protected\n%+v\nlbProtected\n%+v", step, x.prot, wantProt.prot)
		}
		if !slices.Equal(x.protProbList, wantProt.problems) {
			t.Fatalf("step %d: protected problems\n%q\nwant\n%q", step, x.protProbList, wantProt.problems)
		}
		if want := differing(before, after); !slices.Equal(changed, want) {
			t.Fatalf("step %d: changed %v, want %v", step, changed, want)
		}
		before = after
	}
}

// lbIn is a Service load balancer as a test writes it: its vips keys
// and, in the same order, values.
type lbIn struct {
	UUID, Name, Owner, Network string
	VIPs, Backends             []string
}

// row is in parsed, as readRows gives it.
func (in lbIn) row() *lbRow {
	return newLBRow(in.UUID, in.Name, in.Owner, in.Network, in.VIPs, in.Backends)
}

// lbRows is ins parsed.
func lbRows(ins []lbIn) []*lbRow {
	out := make([]*lbRow, len(ins))
	for i, in := range ins {
		out[i] = in.row()
	}
	return out
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// differing is the addresses whose entries differ between a and b,
// sorted and unique.
func differing(a, b []model.ServiceVIP) []netip.Addr {
	idx := func(l []model.ServiceVIP) map[vipKey]model.ServiceVIP {
		m := map[vipKey]model.ServiceVIP{}
		for _, v := range l {
			m[keyOf(v)] = v
		}
		return m
	}
	ma, mb := idx(a), idx(b)
	var out []netip.Addr
	for k, v := range ma {
		if w, ok := mb[k]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, k.vip)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out = append(out, k.vip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
