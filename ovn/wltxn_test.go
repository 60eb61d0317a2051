package ovn_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// TestWorkloadHandoverTxnAtomic (issue 19, found by the e2e test
// TestLiveMigrationLayer2): the live migration handover is one NB
// transaction (the target's port enabled, the source's disabled), but
// libovsdb applies an update row by row (TableCache.Populate2) and hands
// each row's cache event over asynchronously, so a read can come between
// the two rows. No snapshot may drop the VM's address there: a port this
// client saw enabled that turns disabled is left (held), whether the
// target's enable is read yet or not. A real ovsdb-server; the transaction
// and its reverse (a failed migration: the source enabled again) 300
// times; every snapshot the client notifies must list the address. Before
// that rule, it failed in every run.
func TestWorkloadHandoverTxnAtomic(t *testing.T) {
	const rounds = 300
	s := ovsdbtest.Start(t, "")
	net := []string{"external_ids:k8s.ovn.org/network=ns2_green", "external_ids:k8s.ovn.org/topology=layer2"}
	port := func(name, chassis string, remote, enabled bool) []string {
		a := []string{"--", "lsp-add", "ns2_green_ovn_layer2_switch", name, "--", "set", "Logical_Switch_Port", name,
			`port_security="0a:58:0a:64:00:0a 10.100.0.10"`, "external_ids:namespace=ns2", "external_ids:pod=true",
			"external_ids:k8s.ovn.org/network=ns2_green", "external_ids:k8s.ovn.org/topology=layer2",
			"options:requested-chassis=" + chassis, fmt.Sprintf("enabled=%v", enabled)}
		if enabled {
			a = append(a, `addresses="0a:58:0a:64:00:0a 10.100.0.10"`)
		}
		if remote {
			a = append(a, "type=remote")
		}
		return a
	}
	args := append([]string{"ls-add", "ns2_green_ovn_layer2_switch", "--", "set", "Logical_Switch", "ns2_green_ovn_layer2_switch",
		"other_config:subnet=10.100.0.0/16", "external_ids:k8s.ovn.org/role=primary"}, net...)
	args = append(args, "--", "ls-add", "transit_switch",
		"--", "lsp-add", "transit_switch", "tstor-node2", "--", "set", "Logical_Switch_Port", "tstor-node2",
		"type=remote", "external_ids:node=node2", "options:requested-chassis=chassis-node2")
	args = append(args, port("src", "chassis-node1", false, true)...)
	args = append(args, port("dst", "chassis-node2", true, false)...)
	s.MustNBCtl(args...)

	var (
		mu     sync.Mutex
		c      *ovn.Client
		ready  = make(chan struct{})
		seen   int
		broken string
	)
	ip := netip.MustParseAddr("10.100.0.10")
	notify := func() {
		<-ready
		snap, ok := c.Snapshot("node1")
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		for _, w := range snap.WorkloadIPs {
			if w.IP == ip {
				return
			}
		}
		if broken == "" {
			broken = fmt.Sprintf("snapshot %d lists no entry for %s: %+v", seen, ip, snap.WorkloadIPs)
		}
	}
	c, err := ovn.Dial(context.Background(), config.OVN{Northbound: s.Endpoint(), Workloads: true}, zaptest.NewLogger(t), notify)
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	t.Cleanup(c.Close)
	listed := func(h model.Handover) error {
		snap, _ := c.Snapshot("node1")
		for _, w := range snap.WorkloadIPs {
			if w.IP == ip && w.Handover == h {
				return nil
			}
		}
		return fmt.Errorf("node1's workload addresses %+v, want %s %q", snap.WorkloadIPs, ip, h)
	}
	wait := func(h model.Handover) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for err := listed(h); err != nil; err = listed(h) {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(model.HandoverLeaving)
	for range rounds {
		s.MustNBCtl("set", "Logical_Switch_Port", "dst", "enabled=true", `addresses="0a:58:0a:64:00:0a 10.100.0.10"`,
			"--", "set", "Logical_Switch_Port", "src", "enabled=false", "addresses=[]")
		wait(model.HandoverLeft)
		s.MustNBCtl("set", "Logical_Switch_Port", "src", "enabled=true", `addresses="0a:58:0a:64:00:0a 10.100.0.10"`,
			"--", "set", "Logical_Switch_Port", "dst", "enabled=false", "addresses=[]")
		// the VM back on its source, the failed target seen enabled:
		// no migration shows
		wait(model.HandoverNone)
	}
	mu.Lock()
	defer mu.Unlock()
	if broken != "" {
		t.Error(broken)
	}
	t.Logf("%d snapshots", seen)
}
