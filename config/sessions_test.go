package config

import (
	"net/netip"
	"reflect"
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
		ConnectRetry: 1, Families: []Family{IPv4}, MaxPrefixes: 1}
	for _, k := range PeerChanges(a, b) {
		if _, ok := peerKey(k); !ok {
			t.Errorf("PeerChanges names %q, which peerKey does not classify", k)
		}
	}
}
