package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/ovnbgp/ovnbgp/model"
)

// labRoute is a route the lab's provider router originates, with the next
// hop it sends.
type labRoute struct {
	prefix  netip.Prefix
	nextHop netip.Addr
}

// The provider's next hop for its routes: the provider network's gateway
// (172.18.0.1, the default route's next hop on GR_<node>), inside the
// networks of the gateway router's external port, so that the OVN target
// takes it. A BGP speaker sends its session address as the next hop
// (next-hop-self) unless told otherwise; on loopback that is 127.0.0.1,
// which import never takes.
var labProviderNextHop = netip.MustParseAddr("172.18.0.1")

// labProviderRoutes are the routes the provider originates: the lab's
// import rule accepts the first (labImportPrefix); the second matches no
// accept entry; the third is node2's pod subnet, which an accept entry
// covers but which is protected whatever a rule says.
var labProviderRoutes = []labRoute{
	{netip.MustParsePrefix(labImportPrefix), labProviderNextHop},
	{netip.MustParsePrefix("198.51.100.0/24"), labProviderNextHop},
	{netip.MustParsePrefix("10.128.2.0/23"), labProviderNextHop},
}

// labProvider is the lab's "provider router": a plain gobgp server (not
// ovnbgp's speaker, which always sends its own address as the next hop) that
// waits for the node on loopback and originates labProviderRoutes.
type labProvider struct {
	srv    *server.BgpServer
	cancel context.CancelFunc
}

// startProvider starts the provider router on 127.0.0.1:port. notify is
// called on every session or path change.
func startProvider(ctx context.Context, port int, log *zap.Logger, notify func()) (*labProvider, error) {
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelInfo)
	srv := server.NewBgpServer(server.LoggerOption(slog.New(zapslog.NewHandler(log.Core(), zapslog.WithName(log.Name()))), lvl))
	go srv.Serve()
	p := &labProvider{srv: srv, cancel: func() {}}
	fail := func(what string, err error) (*labProvider, error) {
		p.Stop()
		return nil, fmt.Errorf("lab: provider %s: %w", what, err)
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: labProviderASN, RouterId: "192.0.2.1", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
	}}); err != nil {
		return fail("speaker", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	if err := srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(*apiutil.WatchEventMessage_PeerEvent, time.Time) { notify() },
		OnPathUpdate: func([]*apiutil.Path, time.Time) { notify() },
	}, server.WatchPeer(), server.WatchUpdate(false, "", "")); err != nil {
		return fail("watch", err)
	}
	ipv4 := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: labNodeASN, Description: labNode},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: 9, KeepaliveInterval: 3, ConnectRetry: 1, IdleHoldTimeAfterReset: 1,
		}},
		Transport: &api.Transport{PassiveMode: true},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: ipv4, Enabled: true}}},
	}}); err != nil {
		return fail("peer", err)
	}
	paths := make([]*apiutil.Path, 0, len(labProviderRoutes))
	for _, r := range labProviderRoutes {
		nlri, err := bgppkt.NewIPAddrPrefix(r.prefix)
		if err != nil {
			return fail("routes", err)
		}
		nh, err := bgppkt.NewPathAttributeNextHop(r.nextHop)
		if err != nil {
			return fail("routes", err)
		}
		paths = append(paths, &apiutil.Path{Family: bgppkt.RF_IPv4_UC, Nlri: nlri, Age: time.Now().Unix(),
			Attrs: []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP), nh}})
	}
	if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
		return fail("routes", err)
	}
	return p, nil
}

// Learned is what the provider received from the node: its Adj-RIB-In.
func (p *labProvider) Learned(context.Context) ([]model.LearnedPath, error) {
	var out []model.LearnedPath
	err := p.srv.ListPath(apiutil.ListPathRequest{
		TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: "127.0.0.1", Family: bgppkt.RF_IPv4_UC,
	}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
		n, ok := nlri.(*bgppkt.IPAddrPrefix)
		if !ok {
			return
		}
		for _, path := range paths {
			if path.Withdrawal {
				continue
			}
			lp := model.LearnedPath{Peer: labNode, Prefix: n.Prefix}
			for _, a := range path.Attrs {
				switch a := a.(type) {
				case *bgppkt.PathAttributeNextHop:
					lp.NextHop = a.Value
				case *bgppkt.PathAttributeAsPath:
					for _, seg := range a.Value {
						lp.ASPath = append(lp.ASPath, seg.GetAS()...)
					}
				case *bgppkt.PathAttributeCommunities:
					for _, c := range a.Value {
						lp.Communities = append(lp.Communities, strconv.FormatUint(uint64(c>>16), 10)+":"+strconv.FormatUint(uint64(c&0xffff), 10))
					}
				}
			}
			out = append(out, lp)
		}
	})
	slices.SortFunc(out, func(a, b model.LearnedPath) int { return a.Prefix.Addr().Compare(b.Prefix.Addr()) })
	return out, err
}

// Stop ends the session (a Cease) and the server.
func (p *labProvider) Stop() {
	p.cancel()
	p.srv.Stop()
}

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
