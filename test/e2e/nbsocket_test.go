package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/doctor"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestNBDiscoveredInterconnectSocket: OpenShift 4.14+ (interconnect) puts
// the node's NB socket on the host at /var/run/ovn-ic/ovnnb_db.sock. Here a
// test root stands in for /: the real ovsdb-server serves only
// <root>/var/run/ovn-ic/ovnnb_db.sock, and the daemon runs with no
// ovn.northbound, looking for <root>/var/run/ovn-ic/ovnnb_db.sock then
// <root>/var/run/ovn/ovnnb_db.sock (ovn.northboundSockets, the default list
// under the root). It starts before the NB exists (ovnkube-node starts
// after systemd units at boot): status says what it tried and that it
// keeps looking; when the NB comes up it connects without a restart, FRR
// gets the node's subnets, and status, doctor and config validate all name
// the discovered interconnect socket.
func TestNBDiscoveredInterconnectSocket(t *testing.T) {
	t.Parallel()
	w := &world{lab: lab.New(t)}
	root := w.lab.MkdirUnique("root")
	var sockets []string
	for _, s := range config.DefaultNorthboundSockets() {
		sockets = append(sockets, filepath.Join(root, s))
	}
	ic, plain := sockets[0], sockets[1]
	if !strings.HasSuffix(ic, "/var/run/ovn-ic/ovnnb_db.sock") {
		t.Fatalf("the first default socket is %s, want the interconnect one", ic)
	}
	w.nb = w.lab.NewNB() // created, not started
	w.nb.Sock = ic
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}})
	w.d = w.lab.StartDaemon(nil, lab.DaemonConfig{NorthboundSockets: sockets})

	lab.Eventually(t, generous, 100*time.Millisecond, "status: no NB socket yet, both paths tried", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		st, err := w.d.Status()
		if err != nil {
			return err
		}
		if st.NB.Source != "discovered" || st.NB.Connected || st.NB.LastError == "" || len(st.NB.Tried) != 2 {
			return fmt.Errorf("status northbound %+v: want discovered, not connected, an error, two paths tried", st.NB)
		}
		for _, p := range []string{ic, plain} {
			if !strings.Contains(st.NB.LastError, p) {
				return fmt.Errorf("status northbound error %q does not name %s", st.NB.LastError, p)
			}
		}
		t.Logf("before the NB: status northbound error %q, tried %v", st.NB.LastError, st.NB.Tried)
		return nil
	})
	out, _ := w.d.CLI("status")
	t.Logf("ovnbgp status before the NB:\n%s", out)
	if !strings.Contains(string(out), ic) || !strings.Contains(string(out), plain) {
		t.Errorf("ovnbgp status does not name both paths tried:\n%s", out)
	}

	if err := os.MkdirAll(filepath.Dir(ic), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.nb.Start(); err != nil {
		t.Fatal(err)
	}
	nbUp := time.Now()
	if err := w.nb.Init(); err != nil {
		t.Fatal(err)
	}
	w.nb.PopulateOVNK()
	took := waitRIB(t, generous, nbUp, "routes after the NB came up at the interconnect path", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs))
	t.Logf("ovsdb-server up at %s -> FRR best paths: %v", ic, took.Round(time.Millisecond))

	st, err := w.d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !st.NB.Connected || st.NB.Source != "discovered" || st.NB.Current != "unix:"+ic {
		t.Errorf("status northbound %+v: want connected to the discovered unix:%s", st.NB, ic)
	}
	out, _ = w.d.CLI("status")
	t.Logf("ovnbgp status:\n%s", out)
	if !strings.Contains(string(out), "unix:"+ic+" (discovered)") {
		t.Errorf("ovnbgp status does not say unix:%s (discovered):\n%s", ic, out)
	}

	// doctor, on its own connection, finds the same socket the same way.
	out, _ = w.d.CLI("--config", w.d.Config, "doctor", "-o", "json", "--timeout", "10s")
	var rep doctor.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor -o json: %v: %s", err, out)
	}
	var nb *doctor.Result
	for i := range rep.Checks {
		if rep.Checks[i].ID == "nb" {
			nb = &rep.Checks[i]
		}
	}
	if nb == nil || nb.Status != doctor.Pass || !strings.Contains(nb.Finding, "unix:"+ic) || !strings.Contains(nb.Finding, "discovered") {
		t.Errorf("doctor's nb check = %+v, want pass at the discovered unix:%s", nb, ic)
	} else {
		t.Logf("doctor nb: %s", nb.Finding)
	}

	out, err = w.d.CLI("config", "validate", w.d.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ovnbgp config validate: %s", out)
	if !strings.Contains(string(out), "unix:"+ic) || !strings.Contains(string(out), "discovered") {
		t.Errorf("config validate does not say the NB is discovered at unix:%s: %s", ic, out)
	}
}
