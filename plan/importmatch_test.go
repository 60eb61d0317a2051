package plan

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// matchFixture is importFixture with rule "up" replaced by rule "marks"
// from tor-a and tor-b into table 100 only: it rejects blackhole, 65001:666
// and 64512:0:666; its entries are 10.1.0.0/16 with community 65001:100
// (metric 10), 10.2.0.0/16 with large community 64512:1:100, 10.3.0.0/16
// via AS 65010, 10.4.0.0/16 originated by AS 65020, and 10.8.0.0/13
// (length 13..24) at metric 20 (issue 21).
func matchFixture() ImportInput {
	in := importFixture()
	in.Config.Import = []config.ImportRule{{
		Name: "marks", Peers: []string{"tor-a", "tor-b"}, Network: "default", MaxRoutes: 1000, Mode: "auto",
		RejectCommunities: []config.AnyCommunity{{Community: 0xFFFF029A}, {Community: 65001<<16 | 666},
			{Large: true, LargeCommunity: model.LargeCommunity{ASN: 64512, Data2: 666}}},
		Accept: []config.PrefixMatch{
			{Prefix: pfx("10.1.0.0/16"), Communities: []model.Community{65001<<16 | 100}, Metric: 10},
			{Prefix: pfx("10.2.0.0/16"), LargeCommunities: []model.LargeCommunity{{ASN: 64512, Data1: 1, Data2: 100}}},
			{Prefix: pfx("10.3.0.0/16"), ASPathContains: []uint32{65010}},
			{Prefix: pfx("10.4.0.0/16"), OriginAS: 65020},
			{Prefix: pfx("10.8.0.0/13"), MaxLength: 24, Metric: 20},
		},
		Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 100}},
	}}
	return in
}

// marked is a path from tor-a with an AS path and communities.
func marked(prefix string, asPath []uint32, comms ...string) model.LearnedPath {
	p := path("tor-a", prefix, "192.0.2.1")
	p.ASPath, p.Communities = asPath, comms
	return p
}

// TestImportAttrMatches: accept entries match communities, large
// communities, an AS in the path and the origin AS; rejectCommunities
// rejects whatever accepts; each reason names what matched or what is
// missing (issue 21, item 3).
func TestImportAttrMatches(t *testing.T) {
	in := matchFixture()
	in.Learned = []model.LearnedPath{
		marked("10.1.0.0/16", []uint32{65001}, "65001:100"),
		marked("10.1.0.0/16", []uint32{65001}, "65001:200"), // no: 10.1.0.0/16 is only entry 0's
		marked("10.2.0.0/16", []uint32{65001}, "65001:7", "64512:1:100"),
		marked("10.2.0.0/16", []uint32{65001}, "64512:1:101"),
		marked("10.3.0.0/16", []uint32{65001, 65010, 65030}),
		marked("10.3.0.0/16", []uint32{65001, 65030}),
		marked("10.4.0.0/16", []uint32{65001, 65010, 65020}),
		marked("10.4.0.0/16", []uint32{65001, 65020, 65010}),
		marked("10.5.0.0/16", []uint32{65001}, "65001:100", "65001:666"),
		marked("10.6.0.0/16", []uint32{65001}, "blackhole"),
		marked("10.7.0.0/16", []uint32{65001}, "64512:0:666"),
		marked("10.8.0.0/16", []uint32{65001}, "65001:1"),
	}
	// a path keyed (peer, prefix): one per key
	for i := range in.Learned {
		if i%2 == 1 && i < 8 {
			in.Learned[i].Peer = "tor-b"
			in.Learned[i].NextHop = addr("192.0.2.2")
		}
	}
	res := Import(in)
	want := []string{
		"true accepted by rule marks (10.1.0.0/16 length 16 communities [65001:100] metric 10)",
		"false rule marks accept[0] (10.1.0.0/16) needs one of communities [65001:100] (route has 65001:200)",
		"true accepted by rule marks (10.2.0.0/16 length 16 largeCommunities [64512:1:100])",
		"false rule marks accept[1] (10.2.0.0/16) needs one of largeCommunities [64512:1:100] (route has 64512:1:101)",
		"true accepted by rule marks (10.3.0.0/16 length 16 asPathContains [65010])",
		"false rule marks accept[2] (10.3.0.0/16) needs one of asPathContains [65010] in the AS path (route has AS path 65001 65030)",
		"true accepted by rule marks (10.4.0.0/16 length 16 originAS 65020)",
		"false rule marks accept[3] (10.4.0.0/16) needs originAS 65020 (route's origin AS is 65010)",
		"false community 65001:666 matches rejectCommunities of rule marks",
		"false community blackhole matches rejectCommunities of rule marks",
		"false large community 64512:0:666 matches rejectCommunities of rule marks",
		"true accepted by rule marks (10.8.0.0/13 length 13..24 metric 20)",
	}
	var got []string
	for _, p := range res.Paths {
		got = append(got, fmt.Sprint(p.Accepted, " ", p.Reason))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("verdicts (-want +got):\n%s", d)
	}
	by := NewImportTable(in).Count(nil).RejectedBy
	if by[Rejection{"tor-b", RejectAttributes}] != 4 || by[Rejection{"tor-a", RejectCommunity}] != 3 {
		t.Errorf("rejected by cause %v", by)
	}
	// the kernel routes carry their entry's metric
	var kern []string
	for _, r := range res.Kernel {
		kern = append(kern, fmt.Sprint(r.Prefix, " metric ", r.Metric))
	}
	if d := cmp.Diff([]string{"10.1.0.0/16 metric 10", "10.2.0.0/16 metric 0", "10.3.0.0/16 metric 0", "10.4.0.0/16 metric 0", "10.8.0.0/16 metric 20"}, kern); d != "" {
		t.Errorf("kernel (-want +got):\n%s", d)
	}
	// An empty AS path has no origin AS; a route with no community says so.
	in.Learned = []model.LearnedPath{marked("10.4.0.0/16", []uint32{}), marked("10.1.0.0/16", []uint32{65001})}
	res = Import(in)
	if r := res.Paths[0].Reason; r != "rule marks accept[3] (10.4.0.0/16) needs originAS 65020 (route has an empty AS path)" {
		t.Errorf("empty AS path: %s", r)
	}
	if r := res.Paths[1].Reason; r != "rule marks accept[0] (10.1.0.0/16) needs one of communities [65001:100] (route has no community)" {
		t.Errorf("no community: %s", r)
	}
}

// TestImportRejectPerRule: rejectCommunities rejects for its rule only: a
// later rule listing the peer may accept the path.
func TestImportRejectPerRule(t *testing.T) {
	in := matchFixture()
	in.Config.Import = append(in.Config.Import, config.ImportRule{Name: "any", Peers: []string{"tor-a"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 24}}, MaxRoutes: 10, Mode: "auto",
		Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 200}}})
	in.Learned = []model.LearnedPath{marked("10.6.0.0/16", []uint32{65001}, "blackhole")}
	res := Import(in)
	if p := res.Paths[0]; !p.Accepted || p.Reason != "accepted by rule any (10.0.0.0/8 length 8..24)" {
		t.Errorf("path: %+v", p)
	}
	if len(res.Kernel) != 1 || res.Kernel[0].Table != 200 {
		t.Errorf("kernel %+v, want table 200 only", res.Kernel)
	}
}

// TestImportMetricRanks: of the candidates of one table the lowest metric
// wins, entries of one rule and rules alike; ECMP stays among equals; an
// OVN target ignores metrics and explain says so (issue 21, item 4).
func TestImportMetricRanks(t *testing.T) {
	in := matchFixture()
	in.Config.Import[0].Accept = append(in.Config.Import[0].Accept, config.PrefixMatch{Prefix: pfx("10.0.0.0/8"), MaxLength: 24, Metric: 20})
	in.Learned = []model.LearnedPath{
		marked("10.1.0.0/16", []uint32{65001}, "65001:100"), // entry 0, metric 10
		path("tor-b", "10.1.0.0/16", "192.0.2.2"),           // entry 5, metric 20: ranked after
	}
	res := Import(in)
	if len(res.Kernel) != 1 || res.Kernel[0].Metric != 10 || len(res.Kernel[0].NextHops) != 1 || res.Kernel[0].NextHops[0].Addr != addr("192.0.2.1") {
		t.Errorf("entries: kernel %+v, want 10.1.0.0/16 metric 10 via 192.0.2.1 only", res.Kernel)
	}
	// a second rule with a lower metric into the same table wins
	in.Config.Import = append(in.Config.Import, config.ImportRule{Name: "backup", Peers: []string{"tor-b"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 24, Metric: 5}}, MaxRoutes: 10, Mode: "auto",
		Targets: config.ImportTargets{OVN: true, Kernel: config.KernelTarget{Table: 100}}})
	res = Import(in)
	if len(res.Kernel) != 1 || res.Kernel[0].Metric != 5 || res.Kernel[0].Rule != "backup" || res.Kernel[0].NextHops[0].Addr != addr("192.0.2.2") {
		t.Errorf("rules: kernel %+v, want backup's metric 5 via 192.0.2.2", res.Kernel)
	}
	if r := res.Paths[1].Reason; r != "accepted by rule marks (10.0.0.0/8 length 8..24 metric 20) and rule backup (10.0.0.0/8 length 8..24 metric 5); metric 5 applies to the kernel target only: OVN static routes have no metric" {
		t.Errorf("reason: %s", r)
	}
	// equal metrics: config order
	in.Config.Import[1].Accept[0].Metric = 10
	res = Import(in)
	if len(res.Kernel) != 1 || res.Kernel[0].Rule != "marks" || res.Kernel[0].Metric != 10 || len(res.Kernel[0].NextHops) != 1 {
		t.Errorf("ties: kernel %+v, want marks' metric 10 via 192.0.2.1", res.Kernel)
	}
	// equal metrics within a rule: ECMP
	in.Config.Import[0].Accept[5].Metric = 10
	in.Config.Import[1].Accept[0].Metric = 20
	res = Import(in)
	if len(res.Kernel) != 1 || res.Kernel[0].Rule != "marks" || len(res.Kernel[0].NextHops) != 2 {
		t.Errorf("ECMP: kernel %+v, want marks' metric 10 via both", res.Kernel)
	}
	in.Config.Import[1].Accept[0].Metric = 20
	// a rule with only an OVN target may set a metric; explain says it is unused
	in.Config.Import[1].Targets.Kernel.Table = 0
	in.Learned = in.Learned[1:]
	res = Import(in)
	if r := res.Paths[0].Reason; r != "accepted by rule marks (10.0.0.0/8 length 8..24 metric 10) and rule backup (10.0.0.0/8 length 8..24 metric 20); metric 20 is unused: OVN static routes have no metric, and the rule has no kernel target" {
		t.Errorf("OVN only: %s", r)
	}
}

// TestDiffKernelMetric: a route whose metric changes is replaced.
func TestDiffKernelMetric(t *testing.T) {
	r := model.KernelRoute{Table: 100, Prefix: pfx("10.1.0.0/16"), Protocol: 200, NextHops: []model.NextHop{{Addr: addr("192.0.2.1"), Dev: "eth0"}}}
	r10 := r
	r10.Metric = 10
	ops := DiffKernel([]model.KernelRoute{r10}, []model.KernelRoute{r})
	if len(ops) != 1 || ops[0].Op != model.OpReplace || ops[0].Route.Metric != 10 {
		t.Errorf("ops %+v, want one replace at metric 10", ops)
	}
	if ops := DiffKernel([]model.KernelRoute{r10}, []model.KernelRoute{r10}); len(ops) != 0 {
		t.Errorf("same metric: ops %+v", ops)
	}
}

// BenchmarkImportMatches is BenchmarkImport's 100,000 paths with two
// communities each, through a rule with three rejectCommunities and an
// entry that requires a community (issue 21).
func BenchmarkImportMatches(b *testing.B) {
	in := importFixture()
	r := &in.Config.Import[0]
	r.MaxRoutes = 60000
	r.Accept[0].MaxLength = 30
	r.Accept[0].Communities = []model.Community{65001<<16 | 100}
	r.RejectCommunities = []config.AnyCommunity{{Community: 0xFFFF029A}, {Community: 65001<<16 | 666},
		{Large: true, LargeCommunity: model.LargeCommunity{ASN: 64512, Data2: 666}}}
	comms := []string{"65001:7", "65001:100"}
	for i := range 100000 {
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 14), byte(i >> 6), byte(i << 2)}), 30).Masked()
		in.Learned = append(in.Learned, model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1"), Communities: comms})
	}
	b.ResetTimer()
	for b.Loop() {
		res := Import(in)
		if len(res.Alarms) != 1 {
			b.Fatalf("alarms %v", res.Alarms)
		}
	}
}
