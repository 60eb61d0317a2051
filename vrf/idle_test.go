package vrf_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// TestRouteWatcherSleepsWhenIdle: with no route changes the route watcher
// sleeps (it used to wake every 100 ms: an idle node's CPU), and wakes for
// a change in the kernel and for Close.
func TestRouteWatcherSleepsWhenIdle(t *testing.T) {
	n := newNS(t)
	pokes := make(chan struct{}, 1)
	m := n.open(pokes)
	// Routes syncs (a marker and its ack through the watcher) and
	// watches table 100 from then on.
	key := model.KernelRouteKey{Table: 100, Prefix: netip.MustParsePrefix("198.51.100.0/24")}
	if _, _, err := m.Routes([]model.KernelRouteKey{key}); err != nil {
		t.Fatal(err)
	}
	// There is no event for "nothing happened": the old watcher woke 5
	// times in this half second.
	before := vrf.RouteWakes(m)
	time.Sleep(500 * time.Millisecond)
	if w := vrf.RouteWakes(m) - before; w != 0 {
		t.Fatalf("the idle route watcher woke %d times in 500ms, want 0", w)
	}

	drain(pokes)
	n.ip("route", "add", "198.51.100.0/24", "via", "192.0.2.2", "table", "100", "proto", "200")
	waitPoke(t, pokes, "a route added in a watched table")
	if vrf.RouteWakes(m) == before {
		t.Fatal("the watcher saw the route change without waking")
	}

	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: the sleeping watcher was not woken")
	}
}
