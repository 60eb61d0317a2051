package cmd

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ovnbgp/ovnbgp/model"
)

// labHost is the kernel side the lab gives the daemon in place of netlink:
// the lab runs without root and has no provider network, so the links the
// next-hop checks read are fixed. breth0 is the node's bridge on the
// provider network (172.18.0.2/16, the address of GR_<node>'s external
// port, as OVN-Kubernetes' shared gateway sets it up); the session to the
// provider runs over 127.0.0.1, which the lab puts on breth0 too, so that
// the provider's next hop 172.18.0.1 is on-link through the peer's link.
// It holds no routes, and refuses any kernel write: the lab's import rule
// targets OVN only.
type labHost struct{}

func (labHost) Snapshot() (model.Host, error) {
	return model.Host{Links: []model.Link{
		{Name: "lo", Index: 1, Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("::1/128")}},
		{Name: "breth0", Index: 2, Up: true, Addrs: []netip.Prefix{
			netip.MustParsePrefix("172.18.0.2/16"), netip.MustParsePrefix("127.0.0.1/8"),
		}},
	}}, nil
}

func (labHost) TakeChanges() model.HostChanges { return model.HostChanges{} }

func (labHost) Routes([]model.KernelRouteKey) ([]model.KernelRoute, []model.KernelRouteKey, error) {
	return nil, nil, nil
}

func (labHost) Apply(_ context.Context, ops []model.KernelOp) ([]model.KernelOp, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	return nil, fmt.Errorf("the lab has no kernel side: %d kernel operations refused", len(ops))
}

func (labHost) Close() {}
