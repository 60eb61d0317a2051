package plan

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestCapRebuildKeepsEachPeersInstalled: two peers of one capped rule
// (maxRoutes 1) share a prefix that only one of them has room for. After an
// apply, a new table of the same paths and the installed routes (the
// daemon's next full pass) keeps what each peer had: a prefix installed
// through tor-a is not tor-b's (found by review: the full pass withdrew
// tor-b's only route).
func TestCapRebuildKeepsEachPeersInstalled(t *testing.T) {
	in := importFixture()
	in.Config.Import[0].MaxRoutes = 1
	q := path("tor-b", "10.2.0.0/16", "192.0.2.2")
	in.Learned = []model.LearnedPath{q}
	table := NewImportTable(in)
	p1, p2 := path("tor-a", "10.1.0.0/16", "192.0.2.1"), path("tor-b", "10.1.0.0/16", "192.0.2.2")
	table.Update(TableChange{Paths: []model.LearnedPath{p1, p2}})
	res := table.Result()
	// apply: what is desired is what is installed
	fresh := in
	fresh.Learned = table.LearnedPaths()
	fresh.Snapshot.OwnedRoutes = res.OVN
	fresh.Host.Routes = res.Kernel
	rebuilt := NewImportTable(fresh).Result()
	if d := gocmp.Diff(res.OVN, rebuilt.OVN, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("after an apply, a new table wants other OVN rows (-table +new):\n%s", d)
	}
}
