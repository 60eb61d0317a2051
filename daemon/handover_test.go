package daemon

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestHandoverHoldEnds (issue 19, live migration): a VM's address that
// left this node is advertised for its rule's handover holdTime after NB
// showed it leave, with the handover attributes, and withdrawn when the
// hold ends, with nothing changing in NB (the loop's handover timer plans
// the pass).
func TestHandoverHoldEnds(t *testing.T) {
	h := start(t, "default", func(h *harness) {
		h.cfg.advertiseExtra = "  - {name: vms, kind: workloadIP, networks: [default], handover: {holdTime: 1500ms, asPathPrepend: 3}}\n"
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.passDone()
	left := time.Now()
	h.nb.mu.Lock()
	h.nb.snap.WorkloadIPs = []*model.WorkloadIP{{IP: netip.MustParseAddr("10.128.0.5"), Network: "default", Namespace: "vms", Pod: "virt-launcher-db-1-abcde",
		VM: "vms/db-1", Port: "vms_virt-launcher-db-1-abcde", Handover: model.HandoverLeft, Since: left, Source: "Logical_Switch_Port vms_virt-launcher-db-1-abcde"}}
	h.nb.mu.Unlock()
	h.d.poke()
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.128.0.5/32")
	for _, a := range h.sp.advertised() {
		if a.Prefix == netip.MustParsePrefix("10.128.0.5/32") && a.Attrs.ASPathPrepend != 3 {
			t.Errorf("the left VM's address is sent with %+v, want the handover's prepend 3", a.Attrs)
		}
	}
	scrape, _ := metricsScraper(t, h)
	body := scrape()
	for _, l := range []string{`ovnbgp_workload_routes{network="default"} 1`, `ovnbgp_workload_addresses{handover="left",network="default"} 1`} {
		if !strings.Contains(body, l+"\n") {
			t.Errorf("metrics lack %q", l)
		}
	}
	h.wantPrefixes("tor 10.128.0.0/23")
	if held := time.Since(left); held < 1500*time.Millisecond {
		t.Errorf("withdrawn %v after the VM left, before its 1.5 s hold ended", held)
	}
}
