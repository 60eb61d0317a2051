package bgp

import (
	"testing"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// TestGlobalRIBHoldsUnicastOnly: gobgp's global RIB has tables for IPv4
// and IPv6 unicast only, the families ovnbgp speaks. Without a family list
// StartBgp makes one table a family for every family gobgp knows, in the
// global and the route-server RIB, each 2048 shards: 4.6 MB of heap held
// for nothing on an idle node (issue 18, idle RSS).
func TestGlobalRIBHoldsUnicastOnly(t *testing.T) {
	parallel(t)
	l := newLab(t, 102)
	s := l.node(false)
	list := func(f bgppkt.Family) error {
		return s.bgp.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f},
			func(bgppkt.NLRI, []*apiutil.Path) {})
	}
	for _, f := range []bgppkt.Family{bgppkt.RF_IPv4_UC, bgppkt.RF_IPv6_UC} {
		if err := list(f); err != nil {
			t.Errorf("list %v: %v, want the table", f, err)
		}
	}
	if err := list(bgppkt.RF_EVPN); err == nil {
		t.Error("the global RIB has an EVPN table: every family gobgp knows got one")
	}
}
