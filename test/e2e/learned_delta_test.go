package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/bgp"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// speakerIn starts a bgp.Speaker whose listener lives in network namespace
// ns: the socket is created on a thread switched into ns, and stays there.
// Every peer must be passive (the speaker then opens no other socket).
func speakerIn(t *testing.T, ns string, cfg config.BGP) *bgp.Speaker {
	t.Helper()
	var s *bgp.Speaker
	err := lab.InNetns(ns, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		s, err = bgp.New(ctx, cfg, zap.NewNop(), nil)
		return err
	})
	if err != nil {
		t.Fatalf("start speaker in %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background(), false) })
	return s
}

// learnedTable is a learned table kept only from TakeLearned deltas and
// walks of their Resync peers, as the daemon keeps it.
type learnedTable map[model.Key]model.LearnedPath

func (lt learnedTable) sync(t *testing.T, s *bgp.Speaker) {
	t.Helper()
	d := s.TakeLearned()
	for _, p := range d.Paths {
		lt[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
	}
	for _, k := range d.Gone {
		delete(lt, k)
	}
	for _, peer := range d.Resync {
		for k := range lt {
			if k.Peer == peer {
				delete(lt, k)
			}
		}
		err := s.EachLearned(context.Background(), peer, func(p model.LearnedPath) error {
			lt[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
			return nil
		})
		if err != nil && !errors.Is(err, bgp.ErrPeerNotConfigured) {
			t.Fatalf("walk %s: %v", peer, err)
		}
	}
}

// checkpoint waits until a full walk shows want (prefix → "stale",
// "fresh" or a Malformed substring) and the delta table equals the walk,
// path by path.
func (lt learnedTable) checkpoint(t *testing.T, s *bgp.Speaker, what string, want map[string]string) {
	t.Helper()
	_, err := lab.Poll(30*time.Second, 100*time.Millisecond, func() error {
		lt.sync(t, s)
		walk, err := s.Learned(context.Background(), "")
		if err != nil {
			return err
		}
		var bad []string
		if len(walk) != len(want) {
			bad = append(bad, fmt.Sprintf("walk has %d paths, want %d", len(walk), len(want)))
		}
		for _, p := range walk {
			w, ok := want[p.Prefix.String()]
			switch {
			case !ok:
				bad = append(bad, "unexpected "+p.Prefix.String())
			case w == "stale" && !p.Stale, w == "fresh" && (p.Stale || p.Malformed != ""):
				bad = append(bad, fmt.Sprintf("%v not %s: %+v", p.Prefix, w, p))
			case w != "stale" && w != "fresh" && !strings.Contains(p.Malformed, w):
				bad = append(bad, fmt.Sprintf("%v malformed %q, want %q", p.Prefix, p.Malformed, w))
			}
			got, ok := lt[model.Key{Peer: p.Peer, Prefix: p.Prefix}]
			if !ok {
				bad = append(bad, "delta table misses "+p.Prefix.String())
			} else if !reflect.DeepEqual(got, p) {
				bad = append(bad, fmt.Sprintf("%v: delta %+v, walk %+v", p.Prefix, got, p))
			}
		}
		if len(lt) != len(walk) {
			bad = append(bad, fmt.Sprintf("delta table has %d paths, the walk %d", len(lt), len(walk)))
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestLearnedDeltaExaBGP: against a real peer (ExaBGP, IPv4 and IPv6
// sessions, graceful restart), a learned table kept only from
// bgp.Speaker.TakeLearned deltas (plus walks of the Resync peers) equals a
// full walk, path by path, after announcements, re-announcements with other
// attributes, withdrawals, paths gobgp keeps but that are malformed (a
// loop through our ASN, AS 0), a session reset by a config change, the
// peer killed (its paths kept stale) and back (End-of-RIB drops the stale
// ones it does not send again).
func TestLearnedDeltaExaBGP(t *testing.T) {
	l := lab.New(t)
	l.AddImportLink()
	peers := []config.Peer{
		{Name: "exa", Address: lab.ExaIPv4, ASN: 65002, Passive: true, Families: []config.Family{config.IPv4},
			HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second},
		{Name: "exa6", Address: lab.ExaIPv6, ASN: 65002, Passive: true, Families: []config.Family{config.IPv6},
			HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second},
	}
	s := speakerIn(t, l.Node, config.BGP{
		ASN: 65010, RouterID: lab.NodeExtIPv4.Addr(), ListenPort: 179,
		GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second},
		Peers:           peers,
	})
	exa := l.StartExaBGP(lab.ExaConfig{IPv6: true, GracefulRestart: true})
	nh, nh6 := lab.ExaIPv4.String(), lab.ExaIPv6.String()
	lt := learnedTable{}

	exa.MustSend(
		"announce route 10.90.0.0/24 next-hop "+nh+" med 10 community [65002:1]",
		"announce route 10.90.1.0/24 next-hop "+nh,
		"announce route 10.90.2.0/24 next-hop "+nh+" as-path [ 65002 65003 ]",
		"announce route 2001:db8:90::/64 next-hop "+nh6,
		"announce route 2001:db8:91::/64 next-hop "+nh6+" local-preference 300",
	)
	lt.checkpoint(t, s, "announced", map[string]string{
		"10.90.0.0/24": "fresh", "10.90.1.0/24": "fresh", "10.90.2.0/24": "fresh",
		"2001:db8:90::/64": "fresh", "2001:db8:91::/64": "fresh",
	})

	exa.MustSend(
		"announce route 10.90.0.0/24 next-hop "+nh+" med 20 community [65002:2 65002:3]",
		"withdraw route 10.90.1.0/24 next-hop "+nh,
		"announce route 10.90.2.0/24 next-hop "+nh+" as-path [ 65002 65010 ]",
		"announce route 10.90.3.0/24 next-hop "+nh+" as-path [ 65002 0 ]",
		"withdraw route 2001:db8:90::/64 next-hop "+nh6,
		"announce route 2001:db8:92::/64 next-hop "+nh6+" as-path [ 65002 65010 ]",
	)
	changed := map[string]string{
		"10.90.0.0/24": "fresh", "10.90.2.0/24": "routing loop", "10.90.3.0/24": "AS 0",
		"2001:db8:91::/64": "fresh", "2001:db8:92::/64": "routing loop",
	}
	lt.checkpoint(t, s, "re-announced, withdrawn, malformed", changed)

	// A config change that resets both sessions: ExaBGP sends its routes
	// again on the new ones.
	for i := range peers {
		peers[i].HoldTime = 12 * time.Second
	}
	if err := s.SetPeers(context.Background(), peers); err != nil {
		t.Fatal(err)
	}
	lt.checkpoint(t, s, "after a session reset", changed)

	// ExaBGP killed: no NOTIFICATION, the node keeps its paths stale.
	pid, err := os.ReadFile(exa.Dir + "/exabgp.pid")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		t.Fatalf("exabgp pid %q: %v", pid, err)
	}
	if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
		t.Fatalf("kill exabgp %d: %v", n, err)
	}
	exa.Stop() // reaps it
	stale := map[string]string{}
	for p := range changed {
		stale[p] = "stale"
	}
	lt.checkpoint(t, s, "stale while the peer restarts", stale)

	// Back, with part of its routes: its End-of-RIB drops the others.
	if err := os.RemoveAll(exa.Dir); err != nil {
		t.Fatal(err)
	}
	exa = l.StartExaBGP(lab.ExaConfig{IPv6: true, GracefulRestart: true})
	exa.MustSend(
		"announce route 10.90.0.0/24 next-hop "+nh+" med 30",
		"announce route 2001:db8:93::/64 next-hop "+nh6,
	)
	lt.checkpoint(t, s, "after the restart", map[string]string{"10.90.0.0/24": "fresh", "2001:db8:93::/64": "fresh"})
}
