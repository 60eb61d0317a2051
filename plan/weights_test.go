package plan

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestBandwidthWeights: the weights of a multipath route's next hops from
// the link bandwidth of their paths (issue 21, plan/weights.go): an exact
// small ratio is kept in its smallest terms, any other scaled to 1..256 and
// rounded, a path without the community weighs 1, and without any, or with
// all equal, the next hops are equal cost.
func TestBandwidthWeights(t *testing.T) {
	const no = noBandwidth
	mbit := func(n float64) float64 { return n * 1e6 / 8 } // FRR's unit, in bytes per second
	for _, tc := range []struct {
		name string
		bw   []float64
		want []int
	}{
		{"none", []float64{no, no}, []int{0, 0}},
		{"one next hop", []float64{mbit(5)}, []int{0}},
		{"1:3", []float64{mbit(1), mbit(3)}, []int{1, 3}},
		{"3:1 keeps order", []float64{mbit(3), mbit(1)}, []int{3, 1}},
		{"3:3 is equal cost", []float64{mbit(3), mbit(3)}, []int{0, 0}},
		{"2:4:6 in smallest terms", []float64{mbit(2), mbit(4), mbit(6)}, []int{1, 2, 3}},
		{"256:1 fits exactly", []float64{256, 1}, []int{256, 1}},
		{"257:1 is scaled", []float64{257, 1}, []int{256, 1}},
		{"1000:1 scaled, the small one kept at 1", []float64{1000, 1}, []int{256, 1}},
		{"scaled and rounded", []float64{1000, 500, 333}, []int{256, 128, 85}}, // 85.248
		{"rounded half up", []float64{512, 1, 3}, []int{256, 1, 2}},            // 1.5 -> 2
		{"fractions are scaled", []float64{1.5, 3}, []int{128, 256}},
		{"missing weighs 1", []float64{mbit(10), no}, []int{256, 1}},
		{"missing beside 1:3", []float64{mbit(1), mbit(3), no}, []int{85, 256, 1}},
		{"missing beside a scaled one weighs 1", []float64{1e9, 3e8 + 1, no}, []int{256, 77, 1}},
		{"zero weighs 1", []float64{0, mbit(4)}, []int{1, 256}},
		{"all zero is equal cost", []float64{0, 0}, []int{0, 0}},
		{"missing and zero are equal cost", []float64{0, no}, []int{0, 0}},
		{"huge", []float64{math.MaxFloat32, 1}, []int{256, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nhs := make([]model.NextHop, len(tc.bw))
			for i := range nhs {
				nhs[i].Weight = 7 // overwritten
			}
			bandwidthWeights(nhs, tc.bw)
			got := make([]int, len(nhs))
			for i, nh := range nhs {
				got[i] = nh.Weight
				if nh.Weight < 0 || nh.Weight > model.MaxWeight {
					t.Errorf("weight %d out of 0..%d", nh.Weight, model.MaxWeight)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("weights %v, want %v", got, tc.want)
			}
		})
	}
}

// bwPath is path p carrying link bandwidth of mbit Mbit/s.
func bwPath(p model.LearnedPath, mbit float32) model.LearnedPath {
	p.LinkBandwidth = &model.LinkBandwidth{ASN: 65001, BytesPerSecond: mbit * 1e6 / 8}
	return p
}

// TestImportWeights: two peers' paths of one prefix carrying link
// bandwidth 1:3 make one kernel route with next hops weighted 1 and 3; the
// OVN target keeps two equal rows (issue 21). An update that changes only
// the bandwidth re-weights the route in place: the table sees it, and the
// diff is one replace, no delete.
func TestImportWeights(t *testing.T) {
	in := importFixture()
	in.Learned = []model.LearnedPath{
		bwPath(path("tor-a", "10.1.0.0/16", "192.0.2.1"), 1),
		bwPath(path("tor-b", "10.1.0.0/16", "192.0.2.2"), 3),
		path("tor-a", "10.2.0.0/16", "192.0.2.1"),
		path("tor-b", "10.2.0.0/16", "192.0.2.2"),
	}
	tbl := NewImportTable(in)
	res := tbl.Result()
	hops := func(w1, w2 int) []model.NextHop {
		return []model.NextHop{{Addr: addr("192.0.2.1"), Dev: "eth0", Weight: w1}, {Addr: addr("192.0.2.2"), Dev: "eth0", Weight: w2}}
	}
	wantKernel := []model.KernelRoute{
		{Table: 100, Prefix: pfx("10.1.0.0/16"), Protocol: 200, Rule: "up", NextHops: hops(1, 3)},
		{Table: 100, Prefix: pfx("10.2.0.0/16"), Protocol: 200, Rule: "up", NextHops: hops(0, 0)},
	}
	if d := cmp.Diff(wantKernel, res.Kernel, cmpAddrs); d != "" {
		t.Fatalf("kernel (-want +got):\n%s", d)
	}
	if n := len(res.OVN); n != 4 {
		t.Errorf("%d OVN rows, want 4 (two equal-cost rows per prefix): %+v", n, res.OVN)
	}
	if d := cmp.Diff(res, Import(in), cmpAddrs); d != "" {
		t.Errorf("Import and the table differ (-table +Import):\n%s", d)
	}

	// Installed as wanted: no change.
	if ops := DiffKernel(res.Kernel, res.Kernel); len(ops) != 0 {
		t.Errorf("diff of a route with itself: %+v", ops)
	}
	// tor-a now sends 3 too: equal weights, in place.
	tbl.Update(TableChange{Paths: []model.LearnedPath{bwPath(path("tor-a", "10.1.0.0/16", "192.0.2.1"), 3)}})
	res2 := tbl.Result()
	if got := res2.Kernel[0].NextHops; !slices.Equal(got, hops(0, 0)) {
		t.Fatalf("after 3:3, next hops %+v, want equal cost", got)
	}
	ops := DiffKernel(res2.Kernel, res.Kernel)
	if len(ops) != 1 || ops[0].Op != model.OpReplace || ops[0].Route.Prefix != pfx("10.1.0.0/16") {
		t.Fatalf("diff after 3:3 = %+v, want one replace of 10.1.0.0/16", ops)
	}
	// And back to 1:3 from the equal route installed.
	tbl.Update(TableChange{Paths: []model.LearnedPath{bwPath(path("tor-a", "10.1.0.0/16", "192.0.2.1"), 1)}})
	ops = DiffKernel(tbl.Result().Kernel, res2.Kernel)
	if len(ops) != 1 || ops[0].Op != model.OpReplace || !slices.Equal(ops[0].Route.NextHops, hops(1, 3)) {
		t.Fatalf("diff after 1:3 again = %+v, want one replace with weights 1 and 3", ops)
	}

	// explain: the kernel route's weights, and OVN's equal cost said.
	p := Build(BuildInput{Node: "n1", Config: in.Config, Import: res, Snapshot: in.Snapshot, Host: in.Host})
	e := Explain(in.Config, pfx("10.1.0.0/16"), res, nil, p, in.Snapshot, in.Host, testNow)
	sum := strings.Join(e.Summary, "\n")
	for _, want := range []string{
		"import: peer tor-b sent 10.1.0.0/16 via 192.0.2.2 with link bandwidth 375000 bytes/s (AS 65001): accepted",
		"weights: the OVN static routes of 10.1.0.0/16 are equal cost: OVN static routes have no weights",
		"pending: kernel add 10.1.0.0/16 in table 100 via 192.0.2.1 dev eth0 weight 1, 192.0.2.2 dev eth0 weight 3",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("explain lacks %q:\n%s", want, sum)
		}
	}
	e = Explain(in.Config, pfx("10.2.0.0/16"), res, nil, p, in.Snapshot, in.Host, testNow)
	if sum := strings.Join(e.Summary, "\n"); strings.Contains(sum, "weights:") || strings.Contains(sum, "weight ") {
		t.Errorf("explain of a prefix without bandwidth speaks of weights:\n%s", sum)
	}
}

// TestBuildAdoptedWeightedHop: fail static keeps an adopted next hop of a
// weighted route beside the wanted ones, by address and device whatever
// its weight: the wanted next hop is not kept twice, the kept one weighs
// the least, and once written the route is stable (issue 21).
func TestBuildAdoptedWeightedHop(t *testing.T) {
	in := importFixture()
	installed := model.KernelRoute{Table: 100, Prefix: pfx("10.2.0.0/16"), Protocol: 200,
		NextHops: []model.NextHop{{Addr: addr("192.0.2.1"), Dev: "eth0", Weight: 1}, {Addr: addr("192.0.2.2"), Dev: "eth0", Weight: 3}}}
	in.Learned = []model.LearnedPath{
		bwPath(path("tor-a", "10.2.0.0/16", "192.0.2.1"), 1),
		bwPath(path("tor-c", "10.2.0.0/16", "198.51.100.1"), 3), // not a peer of rule up: rejected
	}
	in.Host.Routes = []model.KernelRoute{installed}
	adopted := NewAdopted(nil, in.Host.Routes)
	b := BuildInput{Node: "n1", Config: in.Config, Import: Import(in), Snapshot: in.Snapshot, Host: in.Host, Adopted: adopted}
	p := Build(b)
	var got []model.KernelRoute
	for _, op := range p.Kernel {
		if op.Route != nil && op.Op == model.OpReplace {
			got = append(got, *op.Route)
		}
	}
	want := []model.NextHop{{Addr: addr("192.0.2.1"), Dev: "eth0"}, {Addr: addr("192.0.2.2"), Dev: "eth0"}}
	if len(got) != 1 || !SameNextHops(got[0].NextHops, want) || len(p.Held) != 1 {
		t.Fatalf("kernel ops %+v, held %d; want one replace via %v (equal cost) and one held", p.Kernel, len(p.Held), want)
	}
	// Written: the next pass changes nothing more.
	in.Host.Routes = got
	b.Host = in.Host
	adopted.Forget([]netip.Prefix{pfx("10.2.0.0/16")}, nil, Import(in).Kernel, nil, in.Host.Routes)
	if p := Build(b); len(p.Kernel) != 0 {
		t.Errorf("after the write, kernel ops %+v", p.Kernel)
	}
}
