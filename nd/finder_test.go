package nd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func newFinder(t *testing.T, ns *testNS, n *notes, links ...string) *Finder {
	t.Helper()
	h := ns.h
	f, err := New(Options{Namespace: &h, Notify: n.notify, AdvertiseInterval: time.Second, SolicitInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	f.SetLinks(links)
	return f
}

func status(f *Finder, link string) LinkStatus {
	for _, s := range f.Status() {
		if s.Link == link {
			return s
		}
	}
	return LinkStatus{}
}

// TestFindersLearnEachOther: two Finders on the two ends of a veth with
// only link-local addresses learn each other's address, and a change of
// the peer's address is learned and notified (issue 20).
func TestFindersLearnEachOther(t *testing.T) {
	a, b := newNS(t, "a"), newNS(t, "b")
	vethPair(t, a, "va", b, "vb")
	llA, llB := a.linkLocal("va"), b.linkLocal("vb")
	var na, nb notes
	fa := newFinder(t, a, &na, "va")
	fb := newFinder(t, b, &nb, "vb")
	eventually(t, 20*time.Second, "each Finder learns the other", func() string {
		sa, sb := status(fa, "va"), status(fb, "vb")
		if sa.Peer != llB.WithZone("va") || sb.Peer != llA.WithZone("vb") {
			return "a: " + sa.Peer.String() + " (" + sa.Waiting + sa.LastError + "), b: " + sb.Peer.String() + " (" + sb.Waiting + sb.LastError + ")"
		}
		return ""
	})
	sa := status(fa, "va")
	if sa.Local != llA || (sa.How != FromRA && sa.How != FromRS && sa.How != FromNeighbourTable) || sa.Waiting != "" || sa.Problem != "" || sa.Since.IsZero() {
		t.Errorf("a's status: %+v", sa)
	}
	if got := na.all(); !slices.Equal(got, []string{"va " + llB.WithZone("va").String()}) {
		t.Errorf("a's notes: %q", got)
	}
	// Our own RAs do not loop back into our own neighbour table.
	if out := a.ip("-6", "neigh", "show", "dev", "va"); strings.Contains(out, llA.WithZone("").String()) {
		t.Errorf("a's own address in its neighbour table:\n%s", out)
	}
	// Link down and up: a solicits again at once, and keeps its peer.
	before := status(fa, "va").Solicitations
	a.ip("link", "set", "va", "down")
	eventually(t, 20*time.Second, "a sees va down", func() string {
		if s := status(fa, "va"); s.Waiting != "va is down" {
			return s.Waiting
		}
		return ""
	})
	a.ip("link", "set", "va", "up")
	eventually(t, 20*time.Second, "a solicits after link up", func() string {
		if s := status(fa, "va"); s.Solicitations <= before || s.Peer != llB.WithZone("va") {
			return fmt.Sprintf("%+v", s)
		}
		return ""
	})
	// b's address changes: a learns the new one.
	newB := netip.MustParseAddr("fe80::beef")
	b.ip("addr", "add", "fe80::beef/64", "dev", "vb", "nodad")
	b.ip("addr", "del", llB.WithZone("").String()+"/64", "dev", "vb")
	eventually(t, 20*time.Second, "a learns b's new address", func() string {
		if s := status(fa, "va"); s.Peer != newB.WithZone("va") {
			return s.Peer.String()
		}
		return ""
	})
	if got := na.all(); !slices.Contains(got, "va fe80::beef%va") {
		t.Errorf("a's notes: %q", got)
	}
	if s := status(fa, "va"); s.Problem != "" {
		t.Errorf("a change is no problem: %q", s.Problem)
	}
	// A second router on b's side: a reports it.
	b.ip("addr", "add", "fe80::bad/64", "dev", "vb", "nodad")
	bh := b.h
	var vbIndex int
	for _, s := range []string{b.ip("-o", "link", "show", "vb")} {
		if i := strings.Index(s, ":"); i > 0 {
			for _, c := range s[:i] {
				vbIndex = vbIndex*10 + int(c-'0')
			}
		}
	}
	other, err := openSock(&bh, "vb", vbIndex, netip.MustParseAddr("fe80::bad"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	eventually(t, 20*time.Second, "a reports two routers", func() string {
		if err := other.send(routerAdvertisement(nil), allNodes); err != nil {
			return err.Error()
		}
		if s := status(fa, "va"); !strings.Contains(s.Problem, "two routers on va") {
			return s.Peer.String() + " " + s.Problem
		}
		return ""
	})
	t.Logf("a: %+v", status(fa, "va"))
	// The second router falls silent: the problem ends, b is the peer.
	eventually(t, 20*time.Second, "the problem ends", func() string {
		if s := status(fa, "va"); s.Problem != "" || s.Peer != newB.WithZone("va") {
			return s.Peer.String() + " " + s.Problem
		}
		return ""
	})
}

// TestFinderWaiting: a link where nothing can be learned says why.
func TestFinderWaiting(t *testing.T) {
	a := newNS(t, "a")
	a.ip("link", "add", "v6off", "type", "veth", "peer", "name", "v6off-p")
	a.sh("echo 1 >/proc/sys/net/ipv6/conf/v6off/disable_ipv6")
	a.ip("link", "add", "nogen", "type", "veth", "peer", "name", "nogen-p")
	a.sh("echo 1 >/proc/sys/net/ipv6/conf/nogen/addr_gen_mode")
	a.ip("link", "add", "alone", "type", "veth", "peer", "name", "alone-p")
	a.sh("echo 0 >/proc/sys/net/ipv6/conf/alone/accept_dad; echo 0 >/proc/sys/net/ipv6/conf/alone-p/accept_dad")
	for _, d := range []string{"v6off", "v6off-p", "nogen", "nogen-p", "alone", "alone-p"} {
		a.ip("link", "set", d, "up")
	}
	a.linkLocal("alone")
	var n notes
	f := newFinder(t, a, &n, "nosuch", "v6off", "nogen", "alone", "later")
	a.ip("link", "add", "later", "type", "veth", "peer", "name", "later-p")
	want := map[string]string{
		"nosuch": "no device nosuch",
		"v6off":  "IPv6 disabled on v6off",
		"nogen":  "no link-local address on nogen",
		"alone":  "no router advertisement seen on alone since ",
		"later":  "later is down",
	}
	eventually(t, 20*time.Second, "every link says why it waits", func() string {
		var bad []string
		for _, s := range f.Status() {
			if !strings.Contains(s.Waiting, want[s.Link]) {
				bad = append(bad, s.Link+": "+s.Waiting)
			}
		}
		return strings.Join(bad, "; ")
	})
	eventually(t, 20*time.Second, "solicitations counted", func() string {
		if s := status(f, "alone"); !strings.Contains(s.Waiting, "(sent 3 solicitations)") {
			return s.Waiting
		}
		return ""
	})
	// Reload: a removed link is gone, the others stay.
	f.SetLinks([]string{"alone"})
	if st := f.Status(); len(st) != 1 || st[0].Link != "alone" || st[0].Advertisements == 0 {
		t.Errorf("after SetLinks([alone]): %+v", st)
	}
	if got := n.all(); len(got) != 0 {
		t.Errorf("notes without a peer: %q", got)
	}
}

// TestFinderFromNeighbourTable: a peer whose RA the kernel already
// recorded (a router entry in the neighbour table) is known at start,
// before any RA reaches the Finder's socket.
func TestFinderFromNeighbourTable(t *testing.T) {
	a, b := newNS(t, "a"), newNS(t, "b")
	vethPair(t, a, "va", b, "vb")
	llB := b.linkLocal("vb")
	var nb notes
	fb := newFinder(t, b, &nb, "vb")
	// The precondition is what the Finder reads (readLink), not ip's
	// text: a router entry in a state the Finder takes.
	h := a.h
	r, err := NewReader(&h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	eventually(t, 20*time.Second, "a's kernel records b as a router", func() string {
		fa, err := r.Link("va")
		if err != nil {
			return err.Error()
		}
		for _, n := range fa.Neighbours {
			if n.Router && n.Addr == llB.WithZone("va") {
				return ""
			}
		}
		return fmt.Sprintf("%+v", fa.Neighbours)
	})
	// b falls silent: its later solicitations (it sends three) would
	// otherwise race the table read, and a Finder that learned b from
	// one of them would pass for the wrong reason or fail for a race
	// (CI saw "How: router solicitation").
	fb.Close()
	var na notes
	fa := newFinder(t, a, &na, "va")
	eventually(t, 20*time.Second, "a knows b from the neighbour table", func() string {
		if s := status(fa, "va"); s.Peer != llB.WithZone("va") || s.How != FromNeighbourTable {
			return fmt.Sprintf("%+v; a's neighbours: %s", s, a.ip("-6", "neigh", "show", "dev", "va"))
		}
		return ""
	})
}
