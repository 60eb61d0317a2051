package cmd

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// A kernel route with a metric shows it in `routes imported` and
// `explain`; one at the default shows none (issue 21); a rejected path's
// reason is printed whole.
func TestKernelMetricShown(t *testing.T) {
	r := model.KernelRoute{Table: 100, Prefix: netip.MustParsePrefix("10.99.1.0/25"), Metric: 10, Rule: "marks",
		NextHops: []model.NextHop{{Addr: netip.MustParseAddr("203.0.113.3"), Dev: "eth0"}}}
	d := r
	d.Prefix, d.Metric = netip.MustParsePrefix("10.99.2.0/25"), 0
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	importedTable(w, api.Imported{Kernel: []api.ImportedKernel{{KernelRoute: r, State: api.ImportInstalled}, {KernelRoute: d, State: api.ImportInstalled}}})
	reason := "community 65002:666 matches rejectCommunities of rule marks"
	explainTable(w, api.Explanation{Prefix: r.Prefix, Kernel: []model.KernelRoute{r},
		Learned: []model.LearnedPath{{Peer: "exa", Prefix: r.Prefix, Reason: reason}}})
	w.Flush()
	out := b.String()
	if strings.Count(out, "table 100 metric 10") != 2 || strings.Count(out, "metric") != 2 || !strings.Contains(out, reason) {
		t.Errorf("output:\n%s", out)
	}
}
