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
