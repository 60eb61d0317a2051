package daemon

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvConfigWithholdsIPv4: a peer whose IPv6 session lacks the
// extended next hop capability plans without IPv4; the copy is kept
// while the withheld set stays, and the running config is never changed
// (issue 20).
func TestAdvConfigWithholdsIPv4(t *testing.T) {
	cfg := &config.Config{BGP: config.BGP{Peers: []config.Peer{
		{Name: "a", Families: []config.Family{config.IPv4, config.IPv6}},
		{Name: "b", Families: []config.Family{config.IPv4, config.IPv6}},
	}}}
	var w withheldIPv4
	if got := w.advConfig(cfg, map[string]model.PeerSync{"a": {}, "b": {Established: true}}, nil); got != cfg {
		t.Fatal("nothing withheld, yet the config was copied")
	}
	sync := map[string]model.PeerSync{"a": {WithholdIPv4: true}, "b": {}}
	got := w.advConfig(cfg, sync, nil)
	if got == cfg || !slices.Equal(got.BGP.Peers[0].Families, []config.Family{config.IPv6}) ||
		!slices.Equal(got.BGP.Peers[1].Families, []config.Family{config.IPv4, config.IPv6}) {
		t.Fatalf("peers planned %+v, want a without ipv4 and b as configured", got.BGP.Peers)
	}
	if !slices.Equal(cfg.BGP.Peers[0].Families, []config.Family{config.IPv4, config.IPv6}) {
		t.Fatal("the running config was changed")
	}
	if again := w.advConfig(cfg, sync, nil); again != got {
		t.Fatal("the same withheld set gave a new copy: the advertisement state would be built whole on every pass")
	}
	if back := w.advConfig(cfg, map[string]model.PeerSync{"a": {}}, nil); back != cfg {
		t.Fatal("nothing withheld any more, yet the copy is still planned")
	}
	un := w.advConfig(cfg, map[string]model.PeerSync{"a": {WithholdIPv4: true}}, map[string]bool{"b": true})
	if len(un.BGP.Peers[1].Families) != 0 || !slices.Equal(un.BGP.Peers[0].Families, []config.Family{config.IPv6}) {
		t.Fatalf("an unresolved unnumbered peer b: planned %+v, want b with no family", un.BGP.Peers)
	}
}

// TestPreviewSyncResetPeers: a plan of another config (plan --config)
// sees nothing withheld for a peer whose session that config resets: the
// reload starts a new session, whose OPEN is not known yet. A peer it
// keeps stays withheld, and the speaker's map is never changed.
func TestPreviewSyncResetPeers(t *testing.T) {
	peer := func(name, addr string) config.Peer {
		return config.Peer{Name: name, Address: netip.MustParseAddr(addr), ASN: 65001, Families: []config.Family{config.IPv4, config.IPv6}}
	}
	running := &config.Config{BGP: config.BGP{ASN: 65010, Peers: []config.Peer{peer("a", "2001:db8::1"), peer("b", "2001:db8::2")}}}
	next := &config.Config{BGP: config.BGP{ASN: 65010, Peers: []config.Peer{peer("a", "2001:db8::11"), peer("b", "2001:db8::2")}}}
	sync := map[string]model.PeerSync{"a": {WithholdIPv4: true}, "b": {WithholdIPv4: true}}
	got := previewSync(running, next, sync)
	if got["a"].WithholdIPv4 || !got["b"].WithholdIPv4 {
		t.Errorf("preview sync %+v, want a (reset: new address) not withheld, b (kept) withheld", got)
	}
	if !sync["a"].WithholdIPv4 {
		t.Error("the speaker's sync map was changed")
	}
	if same := previewSync(running, running, sync); !same["a"].WithholdIPv4 {
		t.Error("a plan of the running config changed what is withheld")
	}
}
