package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// frrPrefix is the part of `show bgp ipv4 unicast PREFIX json` read here.
type frrPrefix struct {
	Paths []struct {
		ASPath struct {
			String string `json:"string"`
		} `json:"aspath"`
		Community *struct {
			List []string `json:"list"`
		} `json:"community"`
		LargeCommunity *struct {
			List []string `json:"list"`
		} `json:"largeCommunity"`
		MED       *uint32 `json:"metric"`
		LocalPref *uint32 `json:"locPrf"`
		Peer      struct {
			PeerID string `json:"peerId"`
		} `json:"peer"`
	} `json:"paths"`
}

// frrCommunity turns an entry of FRR's community list into its 32-bit
// value: FRR lists well-known communities by its own names
// (bgpd/bgp_community.c, in mixed case: "gracefulShutdown", "acceptown"),
// others as A:B.
func frrCommunity(s string) (uint32, error) {
	names := map[string]uint32{
		"gracefulshutdown": 0xFFFF0000, "acceptown": 0xFFFF0001, "llgrstale": 0xFFFF0006, "nollgr": 0xFFFF0007,
		"blackhole": 0xFFFF029A, "noexport": 0xFFFFFF01, "noadvertise": 0xFFFFFF02, "localas": 0xFFFFFF03,
		"nopeer": 0xFFFFFF04,
	}
	if v, ok := names[strings.ToLower(s)]; ok {
		return v, nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	h, err1 := strconv.ParseUint(hi, 10, 16)
	l, err2 := strconv.ParseUint(lo, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("FRR community %q is not known to this test", s)
	}
	return uint32(h<<16 | l), nil
}

// errNoPath: FRR has no path for the prefix from the daemon (yet).
type errNoPath struct{ error }

// frrAttrs reads the attributes of FRR's path for prefix from the daemon.
func frrAttrs(w *world, prefix string) (asPath string, comms []uint32, large []string, med, localPref *uint32, raw string, err error) {
	raw, err = w.frr.VTY("show bgp ipv4 unicast " + prefix + " json")
	if err != nil {
		return
	}
	var p frrPrefix
	if err = json.Unmarshal([]byte(raw), &p); err != nil {
		return
	}
	for _, path := range p.Paths {
		if path.Peer.PeerID != lab.NodeIPv4.String() {
			continue
		}
		if path.Community != nil {
			for _, c := range path.Community.List {
				v, cerr := frrCommunity(c)
				if cerr != nil {
					return "", nil, nil, nil, nil, raw, cerr
				}
				comms = append(comms, v)
			}
		}
		if path.LargeCommunity != nil {
			large = path.LargeCommunity.List
		}
		return path.ASPath.String, comms, large, path.MED, path.LocalPref, raw, nil
	}
	return "", nil, nil, nil, nil, raw, errNoPath{fmt.Errorf("FRR has no path for %s from %s", prefix, lab.NodeIPv4)}
}

// TestAttributesReachFRR pushes every community form the validator accepts
// in an advertise rule (each well-known name but llgr-stale, which config
// refuses, ASN:VALUE at its bounds), a large community, MED and AS-path
// prepending through the real daemon to FRR over eBGP, and local
// preference over iBGP, and reads them back from FRR's JSON. Before,
// graceful-shutdown passed config and failed in the speaker, and the
// prefixes were withdrawn.
func TestAttributesReachFRR(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	wellKnown := map[string]uint32{
		"graceful-shutdown": 0xFFFF0000, "accept-own": 0xFFFF0001, "no-llgr": 0xFFFF0007,
		"blackhole": 0xFFFF029A, "no-export": 0xFFFFFF01, "no-advertise": 0xFFFFFF02,
		"no-export-subconfed": 0xFFFFFF03, "no-peer": 0xFFFFFF04,
		"65001:100": 65001<<16 | 100, "0:1": 1, "65535:65534": 0xFFFFFFFE,
	}
	var forms []string
	var want []uint32
	for s, v := range wellKnown {
		forms = append(forms, `"`+s+`"`)
		want = append(want, v)
	}
	slices.Sort(forms)
	slices.Sort(want)
	prefix := lab.DefaultNode1.Subnet.String()

	t.Run("ebgp", func(t *testing.T) {
		w := setup(t, nil, lab.DaemonConfig{Advertise: `  - {name: pods, kind: podNetwork, networks: [default], med: 4294967295, asPathPrepend: 10,
      communities: [` + strings.Join(forms, ", ") + `],
      largeCommunities: ["4294967295:0:7", "65010:1:2"]}`})
		var asPath, raw string
		var comms []uint32
		var large []string
		var med *uint32
		_, err := lab.Poll(generous, 100*time.Millisecond, func() error {
			var err error
			asPath, comms, large, med, _, raw, err = frrAttrs(w, prefix)
			if _, retry := err.(errNoPath); !retry && err != nil {
				return nil // read, but not understood: reported below
			}
			if err == nil {
				err = w.d.Exited()
			}
			return err
		})
		if err == nil {
			_, _, _, _, _, raw, err = frrAttrs(w, prefix)
		}
		if err != nil {
			t.Fatalf("%s: %v\nFRR: %s", prefix, err, raw)
		}
		t.Logf("FRR: %s", raw)
		slices.Sort(comms)
		if !slices.Equal(comms, want) {
			t.Errorf("FRR received communities %#x, want %#x", comms, want)
		}
		slices.Sort(large)
		if want := []string{"4294967295:0:7", "65010:1:2"}; !slices.Equal(large, want) {
			t.Errorf("FRR received large communities %v, want %v", large, want)
		}
		if med == nil || *med != 4294967295 {
			t.Errorf("FRR received MED %v, want 4294967295", med)
		}
		if wantPath := strings.TrimSpace(strings.Repeat("65010 ", 11)); asPath != wantPath {
			t.Errorf("FRR received AS path %q, want %q (own ASN + 10 prepends)", asPath, wantPath)
		}
	})

	t.Run("ibgp", func(t *testing.T) {
		w := setup(t, &lab.FRRConfig{ASN: 65010, Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}},
			lab.DaemonConfig{
				Peers:     []lab.Peer{{Name: "tor", Address: lab.TorIPv4, ASN: 65010}},
				Advertise: `  - {name: pods, kind: podNetwork, networks: [default], localPreference: 4294967295, med: 7, communities: [graceful-shutdown]}`,
			})
		var comms []uint32
		var med, lp *uint32
		var raw string
		_, err := lab.Poll(generous, 100*time.Millisecond, func() error {
			var err error
			_, comms, _, med, lp, raw, err = frrAttrs(w, prefix)
			if _, retry := err.(errNoPath); !retry && err != nil {
				return nil // read, but not understood: reported below
			}
			if err == nil {
				err = w.d.Exited()
			}
			return err
		})
		if err == nil {
			_, _, _, _, _, raw, err = frrAttrs(w, prefix)
		}
		if err != nil {
			t.Fatalf("%s: %v\nFRR: %s", prefix, err, raw)
		}
		t.Logf("FRR: %s", raw)
		if lp == nil || *lp != 4294967295 {
			t.Errorf("FRR received local preference %v, want 4294967295", lp)
		}
		if med == nil || *med != 7 {
			t.Errorf("FRR received MED %v, want 7", med)
		}
		if !slices.Equal(comms, []uint32{0xFFFF0000}) {
			t.Errorf("FRR received communities %#x, want graceful-shutdown", comms)
		}
	})
}
