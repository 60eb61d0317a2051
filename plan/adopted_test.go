package plan

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestBuildHoldsOnlyAdopted: fail static holds the delete of a route only
// when it was adopted (installed when ovnbgp started) and its peer has not
// announced it again nor synced. What is learned in this run goes as soon
// as the peer withdraws it or moves it to another next hop, End-of-RIB or
// not (issue 17: a withdraw was held two minutes after every start).
func TestBuildHoldsOnlyAdopted(t *testing.T) {
	ovnRow := func(uuid, prefix, nh string) model.OVNRoute {
		return model.OVNRoute{UUID: uuid, Router: "GR_n1", Prefix: pfx(prefix), NextHop: addr(nh), OutputPort: "rtoe-GR_n1", Rule: "up"}
	}
	type installed struct {
		ovn    []model.OVNRoute
		kernel []model.KernelRoute
	}
	tests := []struct {
		name    string
		learned []model.LearnedPath
		have    installed
		adopt   bool // everything installed was adopted at start
		synced  bool // every peer synced
		holdAll string
		want    []string
	}{{
		name: "learned in this run, withdrawn, nothing synced: deleted at once",
		have: installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		want: []string{"ovn delete 10.2.0.0/16 via 192.0.2.1", "kernel delete 10.2.0.0/16 via 192.0.2.1"},
	}, {
		name:  "adopted, not announced again, nothing synced: held",
		have:  installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		adopt: true,
		want:  []string{"held ovn delete 10.2.0.0/16", "held kernel delete 10.2.0.0/16"},
	}, {
		name:  "adopted, not announced again, synced: deleted",
		have:  installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		adopt: true, synced: true,
		want: []string{"ovn delete 10.2.0.0/16 via 192.0.2.1", "kernel delete 10.2.0.0/16 via 192.0.2.1"},
	}, {
		name:    "learned in this run, next hop moved: old next hop goes at once",
		learned: []model.LearnedPath{path("tor-b", "10.2.0.0/16", "192.0.2.2")},
		have:    installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		want: []string{"ovn add 10.2.0.0/16 via 192.0.2.2", "ovn delete 10.2.0.0/16 via 192.0.2.1",
			"kernel replace 10.2.0.0/16 via 192.0.2.2"},
	}, {
		name:    "adopted next hop, prefix announced again via another: the adopted one stays until synced",
		learned: []model.LearnedPath{path("tor-b", "10.2.0.0/16", "192.0.2.2")},
		have:    installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		adopt:   true,
		want: []string{"ovn add 10.2.0.0/16 via 192.0.2.2", "kernel replace 10.2.0.0/16 via 192.0.2.2,192.0.2.1",
			"held ovn delete 10.2.0.0/16", "held kernel replace 10.2.0.0/16"},
	}, {
		name:    "learned in this run, but this pass's input is not known: held",
		have:    installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		synced:  true,
		holdAll: "the walk of the learned paths failed",
		want:    []string{"held ovn delete 10.2.0.0/16", "held kernel delete 10.2.0.0/16"},
	}, {
		name:    "two adopted next hops replaced by a third: the new one comes now, the adopted ones stay until synced",
		learned: []model.LearnedPath{path("tor-b", "10.2.0.0/16", "192.0.2.3")},
		have:    installed{nil, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1", "192.0.2.2")}},
		adopt:   true,
		want:    []string{"ovn add 10.2.0.0/16 via 192.0.2.3", "kernel replace 10.2.0.0/16 via 192.0.2.3,192.0.2.1,192.0.2.2", "held kernel replace 10.2.0.0/16"},
	}, {
		name:    "announced again as it was: nothing to do",
		learned: []model.LearnedPath{path("tor-a", "10.2.0.0/16", "192.0.2.1")},
		have:    installed{[]model.OVNRoute{ovnRow("u1", "10.2.0.0/16", "192.0.2.1")}, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}},
		adopt:   true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := importFixture()
			in.Learned = tt.learned
			in.Snapshot.OwnedRoutes = tt.have.ovn
			in.Host.Routes = tt.have.kernel
			b := BuildInput{Node: "n1", Config: in.Config, Import: Import(in), Snapshot: in.Snapshot, Host: in.Host, HoldAll: tt.holdAll}
			if tt.adopt {
				b.Adopted = NewAdopted(tt.have.ovn, tt.have.kernel)
			}
			if tt.synced {
				b.Synced = map[string]bool{"tor-a": true, "tor-b": true, "tor-c": true, "tor-6": true}
			}
			if d := cmp.Diff(tt.want, opLines(Build(b))); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

// TestBuildKeepsOnlyAdoptedHops: a multipath kernel route with an adopted
// next hop and one learned in this run, both withdrawn: the learned one
// goes at once, the adopted one is held; the reason names the peers and
// the latest time it can wait.
func TestBuildKeepsOnlyAdoptedHops(t *testing.T) {
	in := importFixture()
	in.Host.Routes = []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1", "192.0.2.2")}
	deadline := time.Date(2026, 12, 2, 10, 2, 0, 0, time.UTC)
	b := BuildInput{Node: "n1", Config: in.Config, Import: Import(in), Snapshot: in.Snapshot, Host: in.Host,
		Adopted: NewAdopted(nil, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")}),
		Synced:  map[string]bool{"tor-a": true, "tor-6": true},
		SyncBy:  map[string]time.Time{"tor-b": deadline}}
	in.Config.BGP.GracefulRestart.DeferralTime = 120 * time.Second
	p := Build(b)
	if d := cmp.Diff([]string{"kernel replace 10.2.0.0/16 via 192.0.2.1", "held kernel delete 10.2.0.0/16"}, opLines(p)); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	want := "adopted at start and not announced again: waiting for End-of-RIB from tor-b or bgp.gracefulRestart.deferralTime (120s, at the latest 2026-12-02T10:02:00Z) (fail static)"
	if len(p.Held) != 1 || p.Held[0].Reason != want {
		t.Errorf("held %+v, want one with reason %q", p.Held, want)
	}
}

// TestAdoptedForget: an adopted route announced again, or gone, is
// adopted no more; Forget on some prefixes leaves the others alone.
func TestAdoptedForget(t *testing.T) {
	o1 := model.OVNRoute{Router: "GR_n1", Prefix: pfx("10.1.0.0/16"), NextHop: addr("192.0.2.1")}
	o2 := model.OVNRoute{Router: "GR_n1", Prefix: pfx("10.2.0.0/16"), NextHop: addr("192.0.2.1")}
	k1 := kroute(100, "10.1.0.0/16", "192.0.2.1", "192.0.2.2")
	k3 := kroute(100, "10.3.0.0/16", "192.0.2.1")
	a := NewAdopted([]model.OVNRoute{o1, o2}, []model.KernelRoute{k1, k3})
	if a.Len() != 5 || !a.OVN(o1.Key()) || !a.KernelHop(k1.Key(), k1.NextHops[1]) {
		t.Fatalf("new: len %d", a.Len())
	}
	// 10.1.0.0/16 is desired again via .1 (OVN and kernel); .2 still
	// installed and not desired: stays adopted. 10.3.0.0/16 is gone but
	// not among the prefixes looked at: stays.
	a.Forget([]netip.Prefix{pfx("10.1.0.0/16")}, []model.OVNRoute{o1}, []model.KernelRoute{kroute(100, "10.1.0.0/16", "192.0.2.1")},
		[]model.OVNRoute{o1}, []model.KernelRoute{k1})
	if a.OVN(o1.Key()) || a.KernelHop(k1.Key(), k1.NextHops[0]) || !a.KernelHop(k1.Key(), k1.NextHops[1]) || !a.OVN(o2.Key()) || a.Len() != 3 {
		t.Errorf("after 10.1.0.0/16 was announced again: len %d", a.Len())
	}
	// A full pass: 10.3.0.0/16 is no longer installed.
	a.Forget(nil, nil, nil, []model.OVNRoute{o2}, []model.KernelRoute{k1})
	if a.KernelHop(k3.Key(), k3.NextHops[0]) || a.Len() != 2 {
		t.Errorf("after a full pass without 10.3.0.0/16: len %d", a.Len())
	}
	var none *Adopted
	if none.Len() != 0 || none.OVN(o1.Key()) || none.KernelHop(k1.Key(), k1.NextHops[0]) {
		t.Error("a nil Adopted adopts something")
	}
	none.Forget(nil, nil, nil, nil, nil)
}

// TestBuildReplacesAroundAdoptedHop: an adopted next hop and one learned
// in this run, both replaced by a new one: the new one comes and the
// learned one goes now, the adopted one stays (the route was held whole
// when the counts happened to match).
func TestBuildReplacesAroundAdoptedHop(t *testing.T) {
	in := importFixture()
	in.Learned = []model.LearnedPath{path("tor-b", "10.2.0.0/16", "192.0.2.3")}
	in.Host.Routes = []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1", "192.0.2.2")}
	b := BuildInput{Node: "n1", Config: in.Config, Import: Import(in), Snapshot: in.Snapshot, Host: in.Host,
		Adopted: NewAdopted(nil, []model.KernelRoute{kroute(100, "10.2.0.0/16", "192.0.2.1")})}
	want := []string{"ovn add 10.2.0.0/16 via 192.0.2.3", "kernel replace 10.2.0.0/16 via 192.0.2.3,192.0.2.1", "held kernel replace 10.2.0.0/16"}
	if d := cmp.Diff(want, opLines(Build(b))); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
}
