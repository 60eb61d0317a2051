package plan

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// twoPeerPaths are n paths of tor-a and tor-b as the BGP layer gives
// them: AS path and communities shared between paths with the same
// attributes (its attribute cache), the age in whole seconds, the
// default-deny reason it fills in. shared: both peers send the same n/2
// prefixes (two paths a prefix); otherwise each sends its own n/2 (one).
// unique: every path has an AS path of its own (the worst case of the
// table's interned attributes).
func twoPeerPaths(n int, shared, unique bool) []model.LearnedPath {
	asPaths := [][]uint32{{65001}, {65001, 65010}, {65001, 65020, 65030}}
	comms := [][]string{nil, {"65001:100"}, {"65001:100", "65001:200"}}
	nextHops := map[string]netip.Addr{"tor-a": addr("192.0.2.1"), "tor-b": addr("192.0.2.2")}
	age := time.Unix(1_790_000_000, 0)
	paths := make([]model.LearnedPath, 0, n)
	for i := range n {
		peer := []string{"tor-a", "tor-b"}[i%2]
		j := i
		if shared {
			j = i / 2
		}
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(j >> 14), byte(j >> 6), byte(j << 2)}), 30).Masked()
		asPath := asPaths[i%3]
		if unique {
			asPath = []uint32{65001, 4_200_000_000 + uint32(i)}
		}
		paths = append(paths, model.LearnedPath{Peer: peer, Prefix: pf, NextHop: nextHops[peer],
			ASPath: asPath, Origin: "igp", MED: uint32(i % 7), Communities: comms[i%3],
			Age: age.Add(time.Duration(i%60) * time.Second), Reason: "no import rule accepts it (default deny)"})
	}
	return paths
}

// BenchmarkTableMemoryTwoPeers reports the heap an ImportTable keeps per
// path (B/path, after a GC) at 100,000 paths of two peers with the
// attributes of twoPeerPaths, accepted into OVN and a kernel table: one
// path a prefix (distinct) and two (shared), one with an AS path of its
// own each (unique), and distinct with a cap on the rule that holds none
// back (capped).
func BenchmarkTableMemoryTwoPeers(b *testing.B) {
	for _, c := range []struct {
		name           string
		shared, unique bool
		maxRoutes      int
	}{{"distinct", false, false, 0}, {"shared", true, false, 0}, {"unique", false, true, 0}, {"capped", false, false, 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			in := importFixture()
			in.Config.Import[0].Accept[0].MaxLength = 30
			in.Config.Import[0].MaxRoutes = c.maxRoutes
			const n = 100000
			paths := twoPeerPaths(n, c.shared, c.unique)
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				table := NewImportTable(in)
				for i := 0; i < n; i += 1000 {
					table.Update(TableChange{Paths: paths[i : i+1000]})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/path")
				if table.Len() != n || table.counts.Accepted != n {
					b.Fatalf("%d paths, %d accepted", table.Len(), table.counts.Accepted)
				}
				runtime.KeepAlive(table)
			}
		})
	}
}
