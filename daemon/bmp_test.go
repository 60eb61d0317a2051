package daemon

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// bmpState is what the fake speaker was last given, and how often.
func (h *harness) bmpState() (names []string, sys [2]string, sets int) {
	h.sp.mu.Lock()
	defer h.sp.mu.Unlock()
	for _, s := range h.sp.bmp {
		names = append(names, s.Name+"@"+s.Address.String())
	}
	return names, h.sp.bmpSys, h.sp.bmpSets
}

// TestBMPStations: the speaker gets bmp.servers with the node's name and
// ovnbgp's version at start; a reload that changes them gives it the new
// list, one that does not change them does not call it; a speaker restart
// gives the new speaker the list; status shows the stations.
func TestBMPStations(t *testing.T) {
	one := "bmp: {servers: [{name: a, address: 192.0.2.50}]}\n"
	two := "bmp: {servers: [{name: a, address: 192.0.2.50}, {name: b, address: 192.0.2.51, routeMonitoring: all}]}\n"
	h := start(t, "default", func(h *harness) { h.cfg.extra = one })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	names, sys, sets := h.bmpState()
	if len(names) != 1 || names[0] != "a@192.0.2.50" || sys != [2]string{"node1", "ovnbgp test"} || sets != 1 {
		t.Fatalf("at start the speaker got %v %q in %d calls, want [a@192.0.2.50] [node1 ovnbgp test] in 1", names, sys, sets)
	}
	if st := h.d.status(); len(st.BMP) != 1 || st.BMP[0].Name != "a" {
		t.Errorf("status BMP = %+v, want station a", st.BMP)
	}
	scrape, _ := metricsScraper(t, h)
	if body := scrape(); !strings.Contains(body, "ovnbgp_bmp_station_up{station=\"a\"} 1\n") {
		t.Errorf("metrics lack ovnbgp_bmp_station_up for a:\n%s", body)
	}

	h.writeConfig(cfgText{networks: "default", extra: two})
	h.d.reload <- struct{}{}
	h.eventually("the second station", func() bool { n, _, _ := h.bmpState(); return len(n) == 2 })

	// The same stations, another advertise rule: no call.
	_, _, before := h.bmpState()
	h.writeConfig(cfgText{networks: `"*"`, extra: two})
	h.d.reload <- struct{}{}
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	if _, _, sets := h.bmpState(); sets != before {
		t.Errorf("a reload that kept bmp.servers called SetBMP %d more times, want 0", sets-before)
	}

	// A new ASN restarts the speaker: it gets the stations.
	h.writeConfig(cfgText{networks: `"*"`, extra: one, asn: 65011})
	h.d.reload <- struct{}{}
	h.eventually("the restarted speaker's stations", func() bool {
		n, _, sets := h.bmpState()
		return sets > before && len(n) == 1
	})
}

// TestBMPRetried: a SetBMP that fails is retried from the loop until it
// succeeds, and a reload whose stations fail says so in its answer.
func TestBMPRetried(t *testing.T) {
	one := "bmp: {servers: [{name: a, address: 192.0.2.50}]}\n"
	h := start(t, "default", func(h *harness) {
		h.cfg.extra = one
		h.sp.failBMP = 2
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.eventually("the station configured on a retry", func() bool {
		names, _, sets := h.bmpState()
		return len(names) == 1 && sets >= 3
	})
	reloadNeedsRoot(t)
	h.sp.mu.Lock()
	h.sp.failBMP = 1
	h.sp.mu.Unlock()
	h.writeConfig(cfgText{networks: "default", extra: "bmp: {servers: [{name: b, address: 192.0.2.51}]}\n"})
	r := reloadOf(t, h, http.StatusOK)
	if !r.Applied || !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "bmp") && strings.Contains(w, "retries") }) {
		t.Errorf("reload with a failing station: %+v, want applied with a bmp warning", r)
	}
	h.eventually("station b on a retry", func() bool {
		names, _, _ := h.bmpState()
		return len(names) == 1 && names[0] == "b@192.0.2.51"
	})
}
