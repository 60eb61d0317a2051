package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSessionResets(t *testing.T) {
	peer := func(name, addr string) Peer {
		return Peer{Name: name, Address: netip.MustParseAddr(addr), ASN: 65001, HoldTime: 90 * time.Second}
	}
	old := &Config{BGP: BGP{ASN: 64512, Peers: []Peer{peer("a", "192.0.2.1"), peer("b", "192.0.2.2"), peer("c", "192.0.2.3"), peer("d", "192.0.2.4")}}}
	next := &Config{BGP: BGP{ASN: 64512, Peers: []Peer{peer("a", "192.0.2.1"), peer("b", "192.0.2.2"), peer("d", "192.0.2.4"), peer("e", "192.0.2.5")}}}
	next.BGP.Peers[1].HoldTime = 30 * time.Second // b: reset
	next.BGP.Peers[2].MaxPrefixes = 5             // d: applied in place
	// a: keys that are not in the OPEN nor on the TCP connection gobgp
	// holds (our dialer's), applied in place.
	next.BGP.Peers[0].ConnectRetry = 17 * time.Second
	next.BGP.Peers[0].Passive = true
	next.BGP.Peers[0].MaxAdvertised = 3
	got := SessionResets(old, next)
	want := []SessionReset{{Peer: "b", Why: "changed: holdTime"}, {Peer: "c", Why: "removed from bgp.peers"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SessionResets = %+v, want %+v", got, want)
	}
	next.BGP.ASN = 64513
	if got := SessionResets(old, next); len(got) != 4 {
		t.Errorf("a new ASN resets every kept and removed peer: got %+v", got)
	}
}

// TestResetsSession: the keys that need a new OPEN (or a new TCP
// connection) reset the session; the keys applied in place do not, alone
// or together, and any resetting key among them resets.
func TestResetsSession(t *testing.T) {
	for _, tc := range []struct {
		changed []string
		reset   bool
	}{
		{nil, false},
		{[]string{"maxPrefixes"}, false},
		{[]string{"connectRetry"}, false},
		{[]string{"passive"}, false},
		{[]string{"passive", "connectRetry", "maxPrefixes"}, false},
		{[]string{"bfd"}, false},
		{[]string{"holdTime"}, true},
		{[]string{"keepaliveTime"}, true},
		{[]string{"connectRetry", "holdTime"}, true},
		{[]string{"address"}, true},
		{[]string{"asn"}, true},
		{[]string{"port"}, true},
		{[]string{"sourceAddress"}, true},
		{[]string{"interface"}, true},
		{[]string{"ebgpMultihop"}, true},
		{[]string{"ttlSecurity"}, true},
		{[]string{"password"}, true},
		{[]string{"families"}, true},
	} {
		if got := ResetsSession(tc.changed); got != tc.reset {
			t.Errorf("ResetsSession(%v) = %v, want %v", tc.changed, got, tc.reset)
		}
	}
	// Every key PeerChanges names is classified: a new key must be
	// decided on, not reset by accident.
	a := Peer{Name: "a"}
	b := Peer{Name: "a", Address: netip.MustParseAddr("192.0.2.1"), ASN: 1, Port: 1, SourceAddress: netip.MustParseAddr("192.0.2.2"),
		Interface: "x", Passive: true, EBGPMultihop: 1, TTLSecurity: true, Password: "p", HoldTime: 1, KeepaliveTime: 1,
		ConnectRetry: 1, Families: []Family{IPv4}, MaxPrefixes: 1, BFD: BFD{Enabled: true}}
	for _, k := range PeerChanges(a, b) {
		if _, ok := peerKey(k); !ok {
			t.Errorf("PeerChanges names %q, which peerKey does not classify", k)
		}
	}
}

// A BFD change is applied to the running session (gobgp's UpdatePeer
// restarts only its BFD session): no reset, alone or with maxPrefixes; with
// a key that needs a new OPEN it resets, and names bfd too.
func TestBFDChangeKeepsSession(t *testing.T) {
	peer := Peer{Name: "a", Address: netip.MustParseAddr("192.0.2.1"), ASN: 65001, HoldTime: 90 * time.Second,
		BFD: BFD{MinTx: 300 * time.Millisecond, MinRx: 300 * time.Millisecond, Multiplier: 3}}
	on := peer
	on.BFD.Enabled = true
	if got := PeerChanges(peer, on); !reflect.DeepEqual(got, []string{"bfd"}) {
		t.Fatalf("PeerChanges(bfd enabled) = %v, want [bfd]", got)
	}
	faster := on
	faster.BFD.MinRx, faster.MaxPrefixes = 100*time.Millisecond, 7
	for _, c := range []struct {
		name string
		a, b Peer
	}{{"enable", peer, on}, {"disable", on, peer}, {"timers and maxPrefixes", on, faster}} {
		if ch := PeerChanges(c.a, c.b); ResetsSession(ch) {
			t.Errorf("%s: ResetsSession(%v) = true, want false", c.name, ch)
		}
	}
	held := faster
	held.HoldTime = 30 * time.Second
	if ch := PeerChanges(on, held); !ResetsSession(ch) || !reflect.DeepEqual(ch, []string{"holdTime", "bfd", "maxPrefixes"}) {
		t.Errorf("holdTime with bfd: PeerChanges = %v, ResetsSession = %v; want [holdTime bfd maxPrefixes], true", ch, ResetsSession(ch))
	}
	old := &Config{BGP: BGP{ASN: 64512, Peers: []Peer{peer}}}
	next := &Config{BGP: BGP{ASN: 64512, Peers: []Peer{on}}}
	if got := SessionResets(old, next); len(got) != 0 {
		t.Errorf("SessionResets for BFD turned on = %+v, want none", got)
	}
	// Off: the peer's BFD, if it still runs, resets the session.
	if got := SessionResets(next, old); len(got) != 1 || got[0].Peer != "a" || !strings.Contains(got[0].Why, "turn BFD off on the peer first") {
		t.Errorf("SessionResets for BFD turned off = %+v, want a's, saying the peer resets it", got)
	}
}
