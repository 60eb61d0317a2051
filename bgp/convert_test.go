package bgp

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   model.PathAttrs
		key  string
		out  model.PathAttrs
	}{
		{name: "empty", key: "c=;l=;lp=-;med=0;pp=0"},
		{
			name: "order and duplicates do not matter",
			in: model.PathAttrs{
				Communities:      comms("65001:200", "no-export", "65001:100", "65001:200"),
				LargeCommunities: larges("64512:2:1", "64512:1:2"),
				MED:              5, LocalPreference: new(uint32(200)), ASPathPrepend: 3,
			},
			key: "c=65001:100,65001:200,65535:65281;l=64512:1:2,64512:2:1;lp=200;med=5;pp=3",
			out: model.PathAttrs{
				Communities:      comms("65001:100", "65001:200", "no-export"),
				LargeCommunities: larges("64512:1:2", "64512:2:1"),
				MED:              5, LocalPreference: new(uint32(200)), ASPathPrepend: 3,
			},
		},
		{name: "local preference 0 is set, not absent", in: model.PathAttrs{LocalPreference: new(uint32(0))}, key: "c=;l=;lp=0;med=0;pp=0",
			out: model.PathAttrs{LocalPreference: new(uint32(0))}},
		{name: "graceful-shutdown", in: model.PathAttrs{Communities: comms("graceful-shutdown")}, key: "c=65535:0;l=;lp=-;med=0;pp=0",
			out: model.PathAttrs{Communities: comms("graceful-shutdown")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := normalize(tc.in)
			if got := n.key(); got != tc.key {
				t.Errorf("key = %q, want %q", got, tc.key)
			}
			if diff := cmp.Diff(tc.out, n.attrs()); diff != "" && tc.name != "empty" {
				t.Errorf("attrs (-want +got):\n%s", diff)
			}
		})
	}
}

// comms parses communities as config does.
func comms(ss ...string) []model.Community {
	out := make([]model.Community, len(ss))
	for i, s := range ss {
		c, err := model.ParseCommunity(s)
		if err != nil {
			panic(err)
		}
		out[i] = c
	}
	return out
}

// larges parses large communities as config does.
func larges(ss ...string) []model.LargeCommunity {
	out := make([]model.LargeCommunity, len(ss))
	for i, s := range ss {
		c, err := model.ParseLargeCommunity(s)
		if err != nil {
			panic(err)
		}
		out[i] = c
	}
	return out
}

func TestPeerChanges(t *testing.T) {
	base := config.Peer{Name: "tor", Address: netip.MustParseAddr("192.0.2.1"), ASN: 65001, Port: 179,
		HoldTime: 90 * time.Second, Password: "x", Families: []config.Family{config.IPv4}}
	same := base
	same.PasswordFile = "/other/file" // same secret
	if c := config.PeerChanges(base, same); len(c) != 0 {
		t.Errorf("changes = %v, want none", c)
	}
	other := base
	other.Password = "y"
	other.HoldTime = 30 * time.Second
	other.MaxPrefixes = 10
	if c, want := config.PeerChanges(base, other), []string{"password", "holdTime", "maxPrefixes"}; !slices.Equal(c, want) {
		t.Errorf("changes = %v, want %v", c, want)
	}
}

// TestAPIPeer checks the gobgp traps: per-family graceful restart, a short
// deferral time, GTSM, seconds.
func TestAPIPeer(t *testing.T) {
	s := &Speaker{global: config.BGP{ASN: 64512, GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 90 * time.Second}}}
	p := withPeerDefaults(config.Peer{
		Name: "tor", Address: netip.MustParseAddr("2001:db8::1"), ASN: 65001, Port: 1179, Passive: true,
		TTLSecurity: true, Password: "x", HoldTime: 1500 * time.Millisecond, MaxPrefixes: 100,
		Families: []config.Family{config.IPv6, config.IPv4, config.IPv6},
	})
	ap := s.apiPeer(p)
	if gr := ap.GracefulRestart; gr == nil || !gr.Enabled || gr.RestartTime != 90 || gr.DeferralTime != grDeferral || !gr.LocalRestarting {
		t.Errorf("graceful restart = %+v", gr)
	}
	if len(ap.AfiSafis) != 2 {
		t.Fatalf("afi-safis = %v, want ipv4 and ipv6 once each", ap.AfiSafis)
	}
	for _, as := range ap.AfiSafis {
		if !as.GetMpGracefulRestart().GetConfig().GetEnabled() {
			t.Errorf("%v: per-family graceful restart not enabled", as.Config.Family)
		}
		if as.GetPrefixLimits().GetMaxPrefixes() != 100 {
			t.Errorf("%v: prefix limit = %v", as.Config.Family, as.PrefixLimits)
		}
	}
	if ts := ap.TtlSecurity; ts == nil || !ts.Enabled || ts.TtlMin != 255 {
		t.Errorf("ttl security = %+v", ts)
	}
	if ap.Timers.Config.HoldTime != 2 || !ap.Transport.PassiveMode || ap.Transport.RemotePort != 1179 ||
		ap.Conf.AuthPassword != "x" {
		t.Errorf("peer = %+v", ap)
	}

	// Without graceful restart nothing of it is sent.
	s.global.GracefulRestart.Enabled = false
	if ap := s.apiPeer(p); ap.GracefulRestart != nil || ap.AfiSafis[0].MpGracefulRestart != nil {
		t.Errorf("graceful restart without it enabled: %+v %+v", ap.GracefulRestart, ap.AfiSafis[0].MpGracefulRestart)
	}
	// Multihop eBGP.
	p.TTLSecurity, p.EBGPMultihop = false, 3
	if mh := s.apiPeer(p).EbgpMultihop; mh == nil || !mh.Enabled || mh.MultihopTtl != 3 {
		t.Errorf("ebgp multihop = %+v", mh)
	}
}

func TestSilentFailure(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := config.Peer{Name: "tor", Address: netip.MustParseAddr("192.0.2.1"), Port: 179, ConnectRetry: 5 * time.Second, Password: "s3cret"}
	tests := []struct {
		name string
		peer config.Peer
		down time.Time
		want string // substring; "" = no hint
	}{
		{"never down", p, time.Time{}, ""},
		{"not long enough", p, now.Add(-10 * time.Second), ""},
		{"dialing", p, now.Add(-20 * time.Second), "no session for 20s: connecting to 192.0.2.1:179 is refused or gets no answer; check the address and port, that the peer has this node as a neighbor, and TCP MD5 passwords on both sides (a mismatch is silent)"},
		{"passive", func() config.Peer { q := p; q.Passive = true; return q }(), now.Add(-time.Minute), "the peer has not connected to us (passive)"},
		{"no password", func() config.Peer { q := p; q.Password = ""; return q }(), now.Add(-time.Minute), "that the peer expects no TCP MD5 password"},
		{"bound to a device", func() config.Peer { q := p; q.Interface = "eth1"; return q }(), now.Add(-time.Minute), "check the address and port, that it is reachable through interface eth1, that the peer"},
		{"slow retry waits longer", func() config.Peer { q := p; q.ConnectRetry = 30 * time.Second; return q }(), now.Add(-60 * time.Second), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := silentFailure(tt.peer, tt.down, now)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("silentFailure = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Errorf("hint leaks the password: %q", got)
			}
		})
	}
}
