package bgp

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/model"
)

// adjInLinkBandwidth lists what s holds from its peer addr for prefix: the
// link-bandwidth communities of its path, decoded by model's one decoder,
// and whether it has the path at all.
func adjInLinkBandwidth(t testing.TB, s *Speaker, peer netip.Addr, prefix netip.Prefix) ([]model.LinkBandwidth, bool) {
	t.Helper()
	var out []model.LinkBandwidth
	found := false
	err := s.bgp.ListPath(apiutil.ListPathRequest{
		TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: peer.String(), Family: bgppkt.RF_IPv4_UC,
	}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
		if p, ok := nlriPrefix(nlri); !ok || p != prefix {
			return
		}
		for _, path := range paths {
			if path.Withdrawal {
				continue
			}
			found = true
			for _, a := range path.Attrs {
				ec, ok := a.(*bgppkt.PathAttributeExtendedCommunities)
				if !ok {
					continue
				}
				for _, c := range ec.Value {
					raw, err := c.Serialize()
					if err != nil || len(raw) != 8 {
						continue
					}
					if lb, ok := model.DecodeLinkBandwidth([8]byte(raw)); ok {
						out = append(out, lb)
					}
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("list adj-in: %v", err)
	}
	return out, found
}

// TestLinkBandwidthAttribute (issue 21): an advertisement's link bandwidth
// reaches an eBGP peer as the non-transitive link-bandwidth extended
// community, beside the other attributes; a new value replaces it on the
// peer, which never loses the path meanwhile (polled every 2 ms); removing
// it sends the path without it.
func TestLinkBandwidthAttribute(t *testing.T) {
	parallel(t)
	l := newLab(t, 21)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	lb := func(n int) model.PathAttrs {
		return model.PathAttrs{MED: 9, LinkBandwidth: new(model.EndpointsBandwidth(nodeASN, n))}
	}
	vip := adv("tor", "192.0.2.51/32", lb(1))
	other := adv("tor", "192.0.2.52/32", lb(1))
	set(t, node, vip, other)
	waitEstablished(t, node, "tor")
	wait := func(what string, want []model.LinkBandwidth) {
		t.Helper()
		eventually(t, routeTimeout, what, func() (bool, string) {
			got, ok := adjInLinkBandwidth(t, prov, l.addr(2), vip.Prefix)
			return ok && fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("present %v, link bandwidth %v", ok, got)
		})
	}
	wait("1 endpoint: 125000 bytes/s", []model.LinkBandwidth{{ASN: nodeASN, BytesPerSecond: 125000}})
	if got := waitLearned(t, prov, "node", vip.Prefix, other.Prefix)[vip.Prefix]; got.MED != 9 {
		t.Errorf("med %d, want 9 beside the link bandwidth", got.MED)
	}

	var mu sync.Mutex
	var gone []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if _, ok := adjInLinkBandwidth(t, prov, l.addr(2), vip.Prefix); !ok {
				mu.Lock()
				gone = append(gone, time.Now().Format(time.StampMicro))
				mu.Unlock()
			}
		}
	}()
	set(t, node, adv("tor", "192.0.2.51/32", lb(3)), other)
	wait("3 endpoints: 375000 bytes/s", []model.LinkBandwidth{{ASN: nodeASN, BytesPerSecond: 375000}})
	set(t, node, adv("tor", "192.0.2.51/32", model.PathAttrs{MED: 9}), other)
	wait("no weight: no link bandwidth", nil)
	close(stop)
	<-done
	if len(gone) > 0 {
		t.Errorf("the provider lost %v while its link bandwidth changed, at %s: a withdrawal, not an UPDATE", vip.Prefix, strings.Join(gone, ", "))
	}
}
