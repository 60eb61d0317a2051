package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// deltaTable is a learned table kept only from TakeLearned deltas and
// walks of their Resync peers, the way the daemon keeps it.
type deltaTable struct {
	m      map[model.Key]model.LearnedPath
	walked map[string]int
}

func newDeltaTable() *deltaTable {
	return &deltaTable{m: map[model.Key]model.LearnedPath{}, walked: map[string]int{}}
}

// sync applies one TakeLearned: Paths and Gone first, then each Resync
// peer's walk replaces that peer's entries.
func (dt *deltaTable) sync(t testing.TB, s *Speaker) model.LearnedDelta {
	t.Helper()
	d := s.TakeLearned()
	for _, p := range d.Paths {
		dt.m[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
	}
	for _, k := range d.Gone {
		delete(dt.m, k)
	}
	for _, peer := range d.Resync {
		dt.walked[peer]++
		for k := range dt.m {
			if k.Peer == peer {
				delete(dt.m, k)
			}
		}
		err := s.EachLearned(context.Background(), peer, func(p model.LearnedPath) error {
			dt.m[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
			return nil
		})
		if err != nil && !errors.Is(err, ErrPeerNotConfigured) {
			t.Fatalf("walk resync peer %s: %v", peer, err)
		}
	}
	return d
}

// diff says how the table differs from a full walk, "" if not at all.
func (dt *deltaTable) diff(t testing.TB, s *Speaker) (string, []model.LearnedPath) {
	t.Helper()
	walk, err := s.Learned(context.Background(), "")
	if err != nil {
		t.Fatalf("learned: %v", err)
	}
	var out []string
	seen := map[model.Key]bool{}
	for _, p := range walk {
		k := model.Key{Peer: p.Peer, Prefix: p.Prefix}
		seen[k] = true
		got, ok := dt.m[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("missing %v", k))
		case !reflect.DeepEqual(got, p):
			out = append(out, fmt.Sprintf("%v differs: delta %+v, walk %+v", k, got, p))
		}
	}
	for k := range dt.m {
		if !seen[k] {
			out = append(out, fmt.Sprintf("extra %v", k))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; "), walk
}

// checkpoint waits until the walk satisfies want and the delta table
// equals the walk, path by path. A change the deltas missed never heals,
// so the wait fails.
func (dt *deltaTable) checkpoint(t *testing.T, s *Speaker, what string, want func([]model.LearnedPath) string) {
	t.Helper()
	eventually(t, routeTimeout, what, func() (bool, string) {
		dt.sync(t, s)
		d, walk := dt.diff(t, s)
		if w := want(walk); w != "" {
			return false, "walk: " + w
		}
		return d == "", d
	})
}

// exactly wants the walk to hold exactly these prefixes from peer, with
// the given stale flag, and calls check on each path.
func exactly(peer string, stale bool, check func(model.LearnedPath) string, prefixes ...string) func([]model.LearnedPath) string {
	return func(walk []model.LearnedPath) string {
		got := map[string]model.LearnedPath{}
		for _, p := range walk {
			if p.Peer != peer {
				return fmt.Sprintf("path from %s", p.Peer)
			}
			got[p.Prefix.String()] = p
		}
		if len(got) != len(prefixes) {
			return fmt.Sprintf("%d paths, want %d", len(got), len(prefixes))
		}
		for _, want := range prefixes {
			p, ok := got[want]
			if !ok {
				return "no " + want
			}
			if p.Stale != stale {
				return fmt.Sprintf("%s stale %v", want, p.Stale)
			}
			if check != nil {
				if w := check(p); w != "" {
					return w
				}
			}
		}
		return ""
	}
}

// TestTakeLearnedTruth: a learned table kept only from TakeLearned deltas
// (and walks of the Resync peers) equals a full EachLearned walk, path by
// path, after announcements, re-announcements with other attributes,
// withdrawals, a session reset by config,
// a graceful restart of the peer (stale paths, then End-of-RIB dropping
// those not re-sent) and a hard session loss. Each of these changes of the
// Adj-RIB-In reaches the table through its own kind of event (or Resync):
// one missed kind leaves the table different from the walk for good.
func TestTakeLearnedTruth(t *testing.T) {
	skipGRUnderRace(t)
	parallel(t)
	l := newLab(t, 81)
	port := freePort(t)
	prov := l.provider(3, port, provASN, true, "")
	tor := l.peerOf("tor", 3, port, provASN)
	node := l.node(true, tor)
	dt := newDeltaTable()

	a := model.PathAttrs{}
	b := model.PathAttrs{MED: 20, Communities: []model.Community{65001<<16 | 7}}
	all := []string{"10.81.0.0/24", "10.81.1.0/24", "10.81.2.0/24", "10.81.3.0/24", "fd00:81::/64", "fd00:81:1::/64"}
	var advs []model.Advertisement
	for _, p := range all {
		advs = append(advs, adv("node", p, a))
	}
	set(t, prov, advs...)
	waitEstablished(t, node, "tor")
	dt.checkpoint(t, node, "announced", exactly("tor", false, nil, all...))

	// Other attributes for two, two withdrawn, one new.
	advs = []model.Advertisement{
		adv("node", "10.81.0.0/24", b), adv("node", "fd00:81::/64", b),
		adv("node", "10.81.1.0/24", a), adv("node", "fd00:81:1::/64", a),
		adv("node", "10.81.4.0/24", a),
	}
	set(t, prov, advs...)
	now := []string{"10.81.0.0/24", "fd00:81::/64", "10.81.1.0/24", "fd00:81:1::/64", "10.81.4.0/24"}
	med := func(p model.LearnedPath) string {
		want := uint32(0)
		if p.Prefix == pfx("10.81.0.0/24") || p.Prefix == pfx("fd00:81::/64") {
			want = 20
		}
		if p.MED != want {
			return fmt.Sprintf("%v MED %d", p.Prefix, p.MED)
		}
		return ""
	}
	dt.checkpoint(t, node, "re-announced and withdrawn", exactly("tor", false, med, now...))

	looped := med
	// A config change that resets the session.
	tor.HoldTime = 60 * time.Second
	if err := node.SetPeers(context.Background(), []config.Peer{tor}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, node, "tor")
	dt.checkpoint(t, node, "after a session reset", exactly("tor", false, looped, now...))

	// Graceful restart of the provider: the node keeps its paths stale
	// (gobgp marks them without a path event)...
	if err := prov.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	dt.checkpoint(t, node, "stale during the peer's restart", exactly("tor", true, looped, now...))

	// ... and drops, at the restarted peer's End-of-RIB, those it did
	// not send again (without a path event either).
	prov2 := l.provider(3, port, provASN, true, "")
	back := []string{"10.81.0.0/24", "fd00:81:1::/64", "10.81.9.0/24"}
	set(t, prov2, adv("node", "10.81.0.0/24", a), adv("node", "fd00:81:1::/64", b), adv("node", "10.81.9.0/24", b))
	dt.checkpoint(t, node, "after the peer's End-of-RIB", exactly("tor", false, nil, back...))
	if st := peerState(t, node, "tor"); !st.EndOfRIB {
		t.Errorf("tor: no End-of-RIB after the restart: %+v", st)
	}

	// A hard session loss drops everything (gobgp's own withdrawals).
	if err := prov2.Stop(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	dt.checkpoint(t, node, "after a hard session loss", exactly("tor", false, nil))
	if dt.walked["tor"] == 0 {
		t.Errorf("no Resync of tor at all")
	}
}

// TestTakeLearnedQuietAndRemoved: a speaker with nothing new has an empty
// delta; paths come through the delta itself (not only through a Resync);
// a peer that SetPeers removes lands in Resync and its walk says it has
// nothing.
func TestTakeLearnedQuietAndRemoved(t *testing.T) {
	parallel(t)
	l := newLab(t, 82)
	if d := l.speaker("empty", config.BGP{ASN: nodeASN, RouterID: l.addr(9), ListenPort: -1}).TakeLearned(); !d.Empty() {
		t.Errorf("TakeLearned of a speaker without peers = %+v, want empty", d)
	}
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	tor := l.peerOf("tor", 3, port, provASN)
	node := l.node(false, tor)
	waitEstablished(t, node, "tor")
	dt := newDeltaTable()
	// Let the session's Resyncs pass, then announce: the paths come as
	// paths.
	eventually(t, routeTimeout, "the session's resyncs are taken", func() (bool, string) {
		d := dt.sync(t, node)
		return d.Empty(), fmt.Sprintf("%+v", d)
	})
	set(t, prov, adv("node", "10.82.0.0/24", model.PathAttrs{MED: 3}))
	var got []model.LearnedPath
	eventually(t, routeTimeout, "the path comes in a delta", func() (bool, string) {
		d := dt.sync(t, node)
		got = append(got, d.Paths...)
		return len(got) > 0, fmt.Sprintf("%+v", d)
	})
	if len(got) != 1 || got[0].Peer != "tor" || got[0].Prefix != pfx("10.82.0.0/24") || got[0].MED != 3 {
		t.Errorf("delta paths %+v, want tor's 10.82.0.0/24 with MED 3", got)
	}
	if d, _ := dt.diff(t, node); d != "" {
		t.Errorf("delta table differs from the walk: %s", d)
	}

	if err := node.SetPeers(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	d := dt.sync(t, node)
	if !slices.Contains(d.Resync, "tor") {
		t.Errorf("delta after removing tor = %+v, want tor in Resync", d)
	}
	if err := node.EachLearned(context.Background(), "tor", func(model.LearnedPath) error { return nil }); !errors.Is(err, ErrPeerNotConfigured) {
		t.Errorf("EachLearned of a removed peer = %v, want ErrPeerNotConfigured", err)
	}
	if len(dt.m) != 0 {
		t.Errorf("delta table keeps %d paths of a removed peer", len(dt.m))
	}
}

// TestTakeLearnedEBGPLocalPref: a LOCAL_PREF from an eBGP peer is never
// reported (gobgp strips it from its Adj-RIB-In only after announcing the
// UPDATE to watchers, so a delta and a walk could otherwise disagree); an
// iBGP peer's is.
func TestTakeLearnedEBGPLocalPref(t *testing.T) {
	s := &Speaker{global: config.BGP{ASN: nodeASN, RouterID: netip.MustParseAddr("192.0.2.9")}}
	p := pathWithASPath(t, provASN)
	p.Attrs = append(p.Attrs, bgppkt.NewPathAttributeLocalPref(300))
	ebgp := config.Peer{Name: "tor", ASN: provASN}
	if lp := s.learnedPath(ebgp, pfx("10.0.0.0/24"), p, nil); lp.LocalPref != 0 {
		t.Errorf("eBGP path: LocalPref %d, want 0", lp.LocalPref)
	}
	ibgp := config.Peer{Name: "rr", ASN: nodeASN}
	if lp := s.learnedPath(ibgp, pfx("10.0.0.0/24"), pathWithASPath(t, provASN), nil); lp.LocalPref != 0 {
		t.Errorf("iBGP path without LOCAL_PREF: %d", lp.LocalPref)
	}
	q := pathWithASPath(t, provASN)
	q.Attrs = append(q.Attrs, bgppkt.NewPathAttributeLocalPref(300))
	if lp := s.learnedPath(ibgp, pfx("10.0.0.0/24"), q, nil); lp.LocalPref != 300 {
		t.Errorf("iBGP path: LocalPref %d, want 300", lp.LocalPref)
	}
}

// TestLearnedPathSharesUpdateSlices: paths of one UPDATE (the same
// attribute objects) share their AS path and communities slices through
// an attrCache, and a new UPDATE gets its own.
func TestLearnedPathSharesUpdateSlices(t *testing.T) {
	s := &Speaker{global: config.BGP{ASN: nodeASN, RouterID: netip.MustParseAddr("192.0.2.9")}}
	peer := config.Peer{Name: "tor", ASN: provASN}
	p := pathWithASPath(t, provASN, 65002)
	p.Attrs = append(p.Attrs, bgppkt.NewPathAttributeCommunities([]uint32{65001<<16 | 7}))
	var c attrCache
	x := s.learnedPath(peer, pfx("10.0.0.0/24"), p, &c)
	y := s.learnedPath(peer, pfx("10.0.1.0/24"), p, &c)
	if &x.ASPath[0] != &y.ASPath[0] || &x.Communities[0] != &y.Communities[0] {
		t.Errorf("paths of one UPDATE do not share their slices")
	}
	if !reflect.DeepEqual(x.Communities, []string{"65001:7"}) || !reflect.DeepEqual(x.ASPath, []uint32{provASN, 65002}) {
		t.Errorf("path %+v", x)
	}
	q := pathWithASPath(t, provASN)
	z := s.learnedPath(peer, pfx("10.0.2.0/24"), q, &c)
	if !reflect.DeepEqual(z.ASPath, []uint32{provASN}) || z.Communities != nil {
		t.Errorf("a new UPDATE's path %+v", z)
	}
	if w := s.learnedPath(peer, pfx("10.0.2.0/24"), q, nil); !reflect.DeepEqual(w, z) {
		t.Errorf("with and without the cache: %+v vs %+v", w, z)
	}
}

// TestTakeLearnedHostile: what a peer sends that gobgp keeps but that
// must never be imported comes through the delta with Malformed set: a
// path looping through our ASN (which gobgp leaves out of its events
// unless allowed), one with an AS_SET, one with AS 0; a loop path that
// replaces a good one, a good one that replaces a loop path, a
// treat-as-withdraw UPDATE (RFC 7606: a bad ORIGIN) and a session the peer
// closes. The delta table equals the walk at each step.
func TestTakeLearnedHostile(t *testing.T) {
	parallel(t)
	l := newLab(t, 83)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	waitEstablished(t, node, "tor")
	<-w.up
	dt := newDeltaTable()
	nh4, nh6 := l.addr(3), netip.MustParseAddr("fd00:83::3")
	good := []uint32{provASN}
	loop := []uint32{provASN, nodeASN}
	comm := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeCommunities([]uint32{provASN<<16 | 1})}

	w.send(announce(t, nh4, good, false, comm, "10.83.0.0/24", "10.83.1.0/24"),
		announce(t, nh6, good, false, nil, "fd00:83:1::/64"))
	dt.checkpoint(t, node, "good paths", exactly("tor", false, isMalformed(nil), "10.83.0.0/24", "10.83.1.0/24", "fd00:83:1::/64"))

	// A loop replaces a good path, another is new; an AS_SET and an AS 0.
	w.send(announce(t, nh4, loop, false, nil, "10.83.1.0/24", "10.83.2.0/24"),
		announce(t, nh6, loop, false, nil, "fd00:83:2::/64"),
		announce(t, nh4, []uint32{provASN, 65010}, true, nil, "10.83.3.0/24"),
		announce(t, nh4, []uint32{provASN, 0}, false, nil, "10.83.4.0/24"))
	bad := map[string]string{"10.83.1.0/24": "routing loop", "10.83.2.0/24": "routing loop", "fd00:83:2::/64": "routing loop",
		"10.83.3.0/24": "AS_SET", "10.83.4.0/24": "AS 0"}
	dt.checkpoint(t, node, "malformed paths", exactly("tor", false, isMalformed(bad),
		"10.83.0.0/24", "10.83.1.0/24", "fd00:83:1::/64", "10.83.2.0/24", "fd00:83:2::/64", "10.83.3.0/24", "10.83.4.0/24"))

	// A good path replaces a loop; a bad ORIGIN is treated as a withdraw
	// (RFC 7606 7.1); a withdraw of a loop path.
	badOrigin := announce(t, nh4, good, false, nil, "10.83.0.0/24")
	badOrigin.Body.(*bgppkt.BGPUpdate).PathAttributes[0] = bgppkt.NewPathAttributeOrigin(7)
	w.send(announce(t, nh4, good, false, nil, "10.83.2.0/24"), badOrigin, withdraw(t, "fd00:83:2::/64"))
	delete(bad, "10.83.2.0/24")
	dt.checkpoint(t, node, "repaired and withdrawn", exactly("tor", false, isMalformed(bad),
		"10.83.1.0/24", "fd00:83:1::/64", "10.83.2.0/24", "10.83.3.0/24", "10.83.4.0/24"))

	// The peer closes the session: gobgp drops every path; the node dials
	// again and gets one.
	w.mu.Lock()
	w.conn.Close()
	w.mu.Unlock()
	dt.checkpoint(t, node, "session closed", exactly("tor", false, nil))
	select {
	case <-w.up:
	case <-time.After(sessionTimeout):
		t.Fatal("the node did not come back")
	}
	waitEstablished(t, node, "tor")
	w.send(announce(t, nh4, loop, false, comm, "10.83.7.0/24"))
	dt.checkpoint(t, node, "new session", exactly("tor", false, isMalformed(map[string]string{"10.83.7.0/24": "routing loop"}), "10.83.7.0/24"))
}

// isMalformed checks that exactly the prefixes of bad are malformed, each
// for its reason.
func isMalformed(bad map[string]string) func(model.LearnedPath) string {
	return func(p model.LearnedPath) string {
		why, ok := bad[p.Prefix.String()]
		switch {
		case ok && !strings.Contains(p.Malformed, why):
			return fmt.Sprintf("%v: malformed %q, want %q", p.Prefix, p.Malformed, why)
		case !ok && p.Malformed != "":
			return fmt.Sprintf("%v: malformed %q", p.Prefix, p.Malformed)
		}
		return ""
	}
}

// TestTakeLearnedEndOfRIBDropsStale: after a peer's graceful restart,
// gobgp drops the stale paths the peer did not send again when its
// End-of-RIB arrives, without any path event: the End-of-RIB puts the peer
// in Resync, and the walk (which gobgp serializes after the drop) shows
// the table without them. The first walk of the new session happens
// before the End-of-RIB here, so a delta that relied on it would keep the
// stale paths.
func TestTakeLearnedEndOfRIBDropsStale(t *testing.T) {
	skipGRUnderRace(t)
	parallel(t)
	l := newLab(t, 84)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	w.gr = true
	node := l.node(true, l.peerOf("tor", 3, port, provASN))
	waitEstablished(t, node, "tor")
	<-w.up
	dt := newDeltaTable()
	nh4, nh6 := l.addr(3), netip.MustParseAddr("fd00:84::3")
	as := []uint32{provASN}
	w.send(announce(t, nh4, as, false, nil, "10.84.0.0/24", "10.84.1.0/24", "10.84.2.0/24"),
		announce(t, nh6, as, false, nil, "fd00:84:1::/64"))
	all := []string{"10.84.0.0/24", "10.84.1.0/24", "10.84.2.0/24", "fd00:84:1::/64"}
	dt.checkpoint(t, node, "announced", stales(nil, all...))

	// The session drops without a NOTIFICATION: all stale.
	w.mu.Lock()
	w.conn.Close()
	w.mu.Unlock()
	everything := map[string]bool{}
	for _, p := range all {
		everything[p] = true
	}
	dt.checkpoint(t, node, "all stale", stales(everything, all...))

	// The peer is back and sends one path again: the others stay stale
	// until its End-of-RIB.
	select {
	case <-w.up:
	case <-time.After(sessionTimeout):
		t.Fatal("the node did not come back")
	}
	w.send(announce(t, nh4, as, false, nil, "10.84.0.0/24"))
	dt.checkpoint(t, node, "one refreshed", stales(map[string]bool{"10.84.1.0/24": true, "10.84.2.0/24": true, "fd00:84:1::/64": true}, all...))

	w.send(bgppkt.NewEndOfRib(bgppkt.RF_IPv4_UC), bgppkt.NewEndOfRib(bgppkt.RF_IPv6_UC))
	dt.checkpoint(t, node, "stale paths dropped at End-of-RIB", stales(nil, "10.84.0.0/24"))
}

// stales wants the walk to hold exactly prefixes from tor, those of stale
// stale and the others not.
func stales(stale map[string]bool, prefixes ...string) func([]model.LearnedPath) string {
	return func(walk []model.LearnedPath) string {
		if len(walk) != len(prefixes) {
			return fmt.Sprintf("%d paths, want %d", len(walk), len(prefixes))
		}
		for _, p := range walk {
			if !slices.Contains(prefixes, p.Prefix.String()) || p.Peer != "tor" {
				return fmt.Sprintf("unexpected %s %v", p.Peer, p.Prefix)
			}
			if p.Stale != stale[p.Prefix.String()] {
				return fmt.Sprintf("%v stale %v", p.Prefix, p.Stale)
			}
		}
		return ""
	}
}

// skipGRUnderRace skips a test whose peer goes down with graceful restart
// under the race detector: gobgp v4.8.0 races on a path's stale flag then
// (see TestGracefulStop; osrg/gobgp#3658). The race build still runs the
// tests without graceful restart.
func skipGRUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("gobgp v4.8.0 races on a path's stale flag when a graceful-restart peer goes down " +
			"while an event watcher converts its paths (fixed upstream by osrg/gobgp#3658, not yet released)")
	}
}

// TestTakeLearnedMaxPrefixes: the UPDATE that crosses maxPrefixes is stored
// in the Adj-RIB-In without a path event, then gobgp tears the session
// down and drops everything: the delta table follows (empty), through the
// drop's events and the state change's Resync.
func TestTakeLearnedMaxPrefixes(t *testing.T) {
	parallel(t)
	l := newLab(t, 85)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	tor := l.peerOf("tor", 3, port, provASN)
	tor.MaxPrefixes = 2
	node := l.node(false, tor)
	waitEstablished(t, node, "tor")
	<-w.up
	dt := newDeltaTable()
	as := []uint32{provASN}
	w.send(announce(t, l.addr(3), as, false, nil, "10.85.0.0/24", "10.85.1.0/24"))
	dt.checkpoint(t, node, "at the limit", exactly("tor", false, nil, "10.85.0.0/24", "10.85.1.0/24"))
	w.send(announce(t, l.addr(3), as, false, nil, "10.85.2.0/24"))
	dt.checkpoint(t, node, "over the limit: session down, nothing learned", exactly("tor", false, nil))
	if st := peerState(t, node, "tor"); st.State == model.StateEstablished {
		t.Errorf("tor still established over its limit")
	}
}

// TestTrackLearnedOff: with the journal off (a daemon without import rules
// takes no delta), the paths a peer sends are not kept for a delta (a ToR
// reflecting every advertised prefix back made the journal hold a copy of
// each, for good) and their events poke nobody; walks still see them. Turned
// on again, the peer is in the next delta's Resync, and paths come as
// paths again.
func TestTrackLearnedOff(t *testing.T) {
	skipGRUnderRace(t)
	parallel(t)
	l := newLab(t, 117)
	port := freePort(t)
	// Graceful restart on both: the peer's End-of-RIB is the event that
	// says its (empty) table is through, before the pokes are counted.
	prov := l.provider(3, port, provASN, true, "")
	tor := l.peerOf("tor", 3, port, provASN)
	node := l.node(true, tor)
	node.TrackLearned(false)
	waitEstablished(t, node, "tor")
	eventually(t, routeTimeout, "the peer's End-of-RIB", func() (bool, string) {
		st := peerState(t, node, "tor")
		return st.EndOfRIB, fmt.Sprintf("%+v", st)
	})
	pokes := l.pokes["node"].Load()
	set(t, prov, adv("node", "10.117.0.0/24", model.PathAttrs{}), adv("node", "10.117.1.0/24", model.PathAttrs{}))
	waitLearned(t, node, "tor", pfx("10.117.0.0/24"), pfx("10.117.1.0/24"))
	if d := node.TakeLearned(); !d.Empty() {
		t.Errorf("TakeLearned with the journal off = %+v, want empty", d)
	}
	if n := l.pokes["node"].Load(); n != pokes {
		t.Errorf("%d notify calls for paths with the journal off, want none", n-pokes)
	}

	node.TrackLearned(true)
	if d := node.TakeLearned(); !slices.Equal(d.Resync, []string{"tor"}) || len(d.Paths)+len(d.Gone) > 0 {
		t.Errorf("first delta after turning the journal on = %+v, want tor in Resync only", d)
	}
	set(t, prov, adv("node", "10.117.2.0/24", model.PathAttrs{}))
	var got []model.LearnedPath
	eventually(t, routeTimeout, "the new path comes in a delta", func() (bool, string) {
		d := node.TakeLearned()
		got = append(got, d.Paths...)
		return len(got) > 0, fmt.Sprintf("%+v", d)
	})
	if len(got) != 1 || got[0].Prefix != pfx("10.117.2.0/24") {
		t.Errorf("delta paths %+v, want tor's 10.117.2.0/24 only", got)
	}
	if l.pokes["node"].Load() == pokes {
		t.Error("no notify for a path with the journal on")
	}
}
