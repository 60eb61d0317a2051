// Package labpeer is the provider router of `ovnbgp lab`: a plain gobgp
// server that waits for one peer on loopback and originates routes with
// the next hops it is given. ovnbgp's own speaker (package bgp) cannot stand
// in: it always sends its session address as the next hop (next-hop-self),
// 127.0.0.1 on loopback, which import never takes. For the lab and tests
// only: the daemon does not depend on it (TestNotInTheDaemon).
package labpeer

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

// Route is an IPv4 route the peer originates, and the next hop it sends
// (gobgp keeps a locally originated path's next hop towards an eBGP peer
// unless it is unspecified).
type Route struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
}

// Config is the provider router: its own AS and router ID, the port it
// listens on at Listen, and its one passive IPv4 peer.
type Config struct {
	ASN      uint32
	RouterID netip.Addr
	Listen   netip.Addr
	Port     int
	// Peer is the node's address, PeerASN its AS, PeerName the name
	// Received reports for it.
	Peer     netip.Addr
	PeerASN  uint32
	PeerName string
	Routes   []Route
}

// Peer is a running provider router.
type Peer struct {
	srv    *server.BgpServer
	cfg    Config
	cancel context.CancelFunc
}

// Start starts the provider router; notify is called on every session or
// path change.
func Start(ctx context.Context, cfg Config, log *zap.Logger, notify func()) (*Peer, error) {
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelInfo)
	srv := server.NewBgpServer(server.LoggerOption(slog.New(zapslog.NewHandler(log.Core(), zapslog.WithName(log.Name()))), lvl))
	// Owned by p: Stop's srv.Stop cancels Serve and waits for it (StopBgp
	// waits for gobgp's shutdownWG, which counts Serve). StartBgp, below,
	// goes through Serve's loop before anything can fail, so Serve runs
	// by the time any Stop is called.
	go srv.Serve()
	p := &Peer{srv: srv, cfg: cfg, cancel: func() {}}
	fail := func(what string, err error) (*Peer, error) {
		p.Stop()
		return nil, fmt.Errorf("lab peer %s: %w", what, err)
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.ASN, RouterId: cfg.RouterID.String(), ListenPort: int32(cfg.Port), ListenAddresses: []string{cfg.Listen.String()},
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
		Conf: &api.PeerConf{NeighborAddress: cfg.Peer.String(), PeerAsn: cfg.PeerASN, Description: cfg.PeerName},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: 9, KeepaliveInterval: 3, ConnectRetry: 1, IdleHoldTimeAfterReset: 1,
		}},
		Transport: &api.Transport{PassiveMode: true},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: ipv4, Enabled: true}}},
	}}); err != nil {
		return fail("peer", err)
	}
	paths := make([]*apiutil.Path, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		nlri, err := bgppkt.NewIPAddrPrefix(r.Prefix)
		if err != nil {
			return fail("routes", err)
		}
		nh, err := bgppkt.NewPathAttributeNextHop(r.NextHop)
		if err != nil {
			return fail("routes", err)
		}
		paths = append(paths, &apiutil.Path{Family: bgppkt.RF_IPv4_UC, Nlri: nlri, Age: time.Now().Unix(),
			Attrs: []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP), nh}})
	}
	if len(paths) > 0 {
		if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
			return fail("routes", err)
		}
	}
	return p, nil
}

// Received is what the peer sent: the provider's Adj-RIB-In, by prefix.
func (p *Peer) Received(context.Context) ([]model.LearnedPath, error) {
	var out []model.LearnedPath
	err := p.srv.ListPath(apiutil.ListPathRequest{
		TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: p.cfg.Peer.String(), Family: bgppkt.RF_IPv4_UC,
	}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
		n, ok := nlri.(*bgppkt.IPAddrPrefix)
		if !ok {
			return
		}
		for _, path := range paths {
			if path.Withdrawal {
				continue
			}
			lp := model.LearnedPath{Peer: p.cfg.PeerName, Prefix: n.Prefix}
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

// Stop ends the session (a Cease) and the server, and returns once the
// server's Serve loop and its sessions' goroutines have returned (the
// event watch's goroutine ends on its own once cancelled: gobgp's).
func (p *Peer) Stop() {
	p.cancel()
	p.srv.Stop()
}
