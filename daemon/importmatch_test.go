package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/api"
)

// TestPlanConfigImportMatches (issue 21): plan --config with changed
// import matches (rejectCommunities, an entry's communities and metric)
// predicts the route changes and resets no session; reloaded, the path is
// rejected with the exact reason, the session kept.
func TestPlanConfigImportMatches(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	reloadNeedsRoot(t)
	marked := learnedUplink
	marked.Communities = []string{"65001:666"}
	other := learnedUplink
	other.Prefix = netip.MustParsePrefix("198.51.101.0/24")
	other.Communities = []string{"65001:100"}
	h.sp.setLearned(marked, other)
	h.d.poke()
	h.eventually("both routes in table 100", func() bool { return len(h.kernelPrefixes()) == 2 })

	rule := strings.Replace(importRule("auto"), "    accept: [{prefix: 198.51.100.0/22, maxLength: 24}]\n",
		"    accept: [{prefix: 198.51.100.0/22, maxLength: 24, communities: [\"65001:100\", \"65001:666\"], metric: 30}]\n    rejectCommunities: [\"65001:666\"]\n", 1)
	c := h.cfg
	c.extra = rule
	code, body := post(t, h.sock, api.PathPlan, api.PlanRequest{Name: "/home/op/new.yaml", Text: c.String()})
	if code != http.StatusOK {
		t.Fatalf("plan --config: %d %s", code, body)
	}
	var pr api.PlanResponse
	if err := json.Unmarshal([]byte(body), &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.SessionResets) != 0 {
		t.Errorf("plan --config resets %+v, want none: import matches are read by the import decision only", pr.SessionResets)
	}
	var ops []string
	for _, op := range pr.Plan.Kernel {
		if op.Route != nil {
			ops = append(ops, fmt.Sprint(op.Op, " ", op.Route.Prefix, " metric ", op.Route.Metric))
		}
	}
	slices.Sort(ops)
	if want := []string{"delete 198.51.100.0/24 metric 0", "replace 198.51.101.0/24 metric 30"}; !slices.Equal(ops, want) {
		t.Errorf("plan --config kernel ops %v, want %v", ops, want)
	}

	h.writeConfig(c)
	if r := reloadOf(t, h, http.StatusOK); !r.Applied || len(r.SessionResets) != 0 {
		t.Errorf("reload %+v, want applied, no session reset", r)
	}
	h.d.poke()
	h.eventually("one route left, at metric 30", func() bool {
		rs := h.host.routes()
		return len(rs) == 1 && rs[0].Prefix == other.Prefix && rs[0].Metric == 30
	})
	paths, _, err := api.NewClient(h.sock).LearnedRoutes(context.Background(), api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	why := map[string]string{}
	for _, p := range paths {
		why[p.Prefix.String()] = p.Reason
	}
	if w := why["198.51.100.0/24"]; w != "community 65001:666 matches rejectCommunities of rule uplink" {
		t.Errorf("rejected path's reason %q", w)
	}
	if w := why["198.51.101.0/24"]; !strings.HasPrefix(w, "accepted by rule uplink (198.51.100.0/22 length 22..24 communities [65001:100 65001:666] metric 30)") {
		t.Errorf("accepted path's reason %q", w)
	}
}
