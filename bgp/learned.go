package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// ReasonDefaultDeny is the Reason of every learned path: gobgp's import
// policy rejects everything; ovnbgp's own import rules decide later.
const ReasonDefaultDeny = "no import rule accepts it (default deny, RFC 8212)"

// ErrPeerNotConfigured is returned (wrapped) by EachLearned for a peer
// that is not configured: a peer of LearnedDelta.Resync that SetPeers
// removed has no paths.
var ErrPeerNotConfigured = errors.New("peer is not configured")

// Learned returns the Adj-RIB-In of the named peer ("" = every peer), before
// any policy, sorted by peer and prefix. It holds the whole table in memory:
// the control API uses EachLearned instead.
func (s *Speaker) Learned(ctx context.Context, peer string) ([]model.LearnedPath, error) {
	var out []model.LearnedPath
	err := s.EachLearned(ctx, peer, func(p model.LearnedPath) error {
		out = append(out, p)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		return lessKey(model.Key{Peer: out[i].Peer, Prefix: out[i].Prefix}, model.Key{Peer: out[j].Peer, Prefix: out[j].Prefix})
	})
	return out, err
}

// EachLearned calls fn for every path in the Adj-RIB-In of the named peer
// ("" = every peer), before any policy: peers in name order, then family by
// family, in gobgp's table order within a family. One path is built at a
// time, so memory does not grow with the table (gobgp still copies its
// table's index for the walk). Every path is reported with Accepted false:
// nothing a peer sends enters gobgp's Loc-RIB. A path whose AS path holds our
// own ASN (a peer reflecting our routes back) is reported as gobgp keeps it,
// with a Reason saying so. An error from fn ends the walk and is returned;
// errors listing one peer's family are joined and returned after the others
// were walked.
func (s *Speaker) EachLearned(ctx context.Context, peer string, fn func(model.LearnedPath) error) error {
	s.mu.Lock()
	var peers []config.Peer
	if peer == "" {
		for _, name := range sortedKeys(s.peers) {
			peers = append(peers, s.peers[name])
		}
	} else if p, ok := s.peers[peer]; ok {
		peers = append(peers, p)
	}
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return errors.New("list learned paths: speaker is stopped")
	}
	if peer != "" && len(peers) == 0 {
		return fmt.Errorf("list learned paths: peer %q: %w", peer, ErrPeerNotConfigured)
	}

	var errs []error
	var stop error // from fn or ctx: ends the walk
	var cache attrCache
	for _, p := range peers {
		for _, f := range p.Families {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := s.bgp.ListPath(apiutil.ListPathRequest{
				TableType: api.TableType_TABLE_TYPE_ADJ_IN,
				Name:      p.Address.String(),
				Family:    pktFamily(f),
			}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
				if stop != nil {
					return // gobgp has no way to end its walk early
				}
				prefix, ok := nlriPrefix(nlri)
				if !ok {
					return
				}
				for _, path := range paths {
					if path.Withdrawal {
						continue
					}
					if stop = fn(s.learnedPath(p, prefix, path, &cache)); stop != nil {
						return
					}
				}
				stop = ctx.Err()
			})
			if stop != nil {
				return stop
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("list learned %s paths of peer %q: %w", f, p.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// SessionEndPending reports whether gobgp has already ended the session
// of the named peer ("" = any configured peer) that the speaker still sees
// Established, with graceful restart negotiated (without it nothing is
// kept, and a walk that lacks the paths decides right): gobgp drops the Adj-RIB-In and then reports the session's
// end, so a walk (EachLearned) that gobgp answered in between lacks the
// paths while the speaker, and the graceful-restart windows read from it,
// still say Established. The daemon asks right after a walk: decided on
// it, routes a graceful restart keeps would be deleted; instead the walk
// counts as failed (nothing is deleted) and the next pass, after the
// event, walks again. gobgp's own session state is read (ListPeer),
// serialized after the walk's read.
func (s *Speaker) SessionEndPending(ctx context.Context, peer string) (bool, error) {
	s.mu.Lock()
	var addrs []netip.Addr
	for name, p := range s.peers {
		if peer == "" || name == peer {
			addrs = append(addrs, p.Address)
		}
	}
	s.mu.Unlock()
	up := map[netip.Addr]bool{}
	s.sess.mu.Lock()
	for _, a := range addrs {
		if ss := s.sess.all[a]; ss != nil && ss.state == model.StateEstablished && ss.gr != nil {
			up[a] = true // only a graceful-restart peer's paths are ever kept
		}
	}
	s.sess.mu.Unlock()
	if len(up) == 0 {
		return false, nil
	}
	req := &api.ListPeerRequest{}
	if len(up) == 1 {
		for a := range up {
			req.Address = a.String()
		}
	}
	pending := false
	err := s.bgp.ListPeer(ctx, req, func(ap *api.Peer) {
		a, err := netip.ParseAddr(ap.GetConf().GetNeighborAddress())
		if err == nil && up[a.Unmap()] && ap.GetState().GetSessionState() != api.PeerState_SESSION_STATE_ESTABLISHED {
			pending = true
		}
	})
	if err != nil {
		return false, fmt.Errorf("read the peers' session states: %w", err)
	}
	return pending, nil
}

// attrCache lets the paths of one UPDATE share their AS path and
// communities slices: gobgp gives every path of an UPDATE the same
// attribute objects, so a walk or an event converts each attribute once
// and the learned table holds one copy per UPDATE, not per prefix. Nobody
// mutates a LearnedPath's slices (the daemon, plan and cmd only read
// them). The zero value is ready; one cache serves one goroutine.
type attrCache struct {
	asAttr *bgppkt.PathAttributeAsPath
	asPath []uint32
	asSet  bool

	comm  *bgppkt.PathAttributeCommunities
	large *bgppkt.PathAttributeLargeCommunities
	comms []string

	ext    *bgppkt.PathAttributeExtendedCommunities
	linkBW *model.LinkBandwidth
}

// linkBandwidthOf is the first link-bandwidth community of a, nil if none.
// gobgp v4.8.0 decodes type 0x40 and the transitive 0x00 (FRR's default)
// with subtype 0x04 alike as a LinkBandwidthExtended, and serializes it
// as 0x40: model.DecodeLinkBandwidth reads those octets.
func (c *attrCache) linkBandwidthOf(a *bgppkt.PathAttributeExtendedCommunities) *model.LinkBandwidth {
	if c != nil && a == c.ext {
		return c.linkBW
	}
	var out *model.LinkBandwidth
	for _, v := range a.Value {
		lb, ok := v.(*bgppkt.LinkBandwidthExtended)
		if !ok {
			continue
		}
		b, err := lb.Serialize()
		if err != nil || len(b) != 8 {
			continue
		}
		if l, ok := model.DecodeLinkBandwidth([8]byte(b)); ok {
			out = &l
			break
		}
	}
	if c != nil {
		c.ext, c.linkBW = a, out
	}
	return out
}

// asPathOf is the flattened AS path of a, and whether it holds an AS_SET.
func (c *attrCache) asPathOf(a *bgppkt.PathAttributeAsPath) ([]uint32, bool) {
	if c != nil && a == c.asAttr {
		return c.asPath, c.asSet
	}
	out, set := []uint32{}, false
	for _, seg := range a.Value {
		out = append(out, seg.GetAS()...)
		if seg.GetType() == bgppkt.BGP_ASPATH_ATTR_TYPE_SET {
			set = true
		}
	}
	if c != nil {
		c.asAttr, c.asPath, c.asSet = a, out, set
	}
	return out, set
}

// communitiesOf are the communities, then the large communities (the ones
// with three parts: model.LearnedPath has one list), nil if none.
func (c *attrCache) communitiesOf(comm *bgppkt.PathAttributeCommunities, large *bgppkt.PathAttributeLargeCommunities) []string {
	if c != nil && comm == c.comm && large == c.large {
		return c.comms
	}
	var out []string
	if comm != nil {
		for _, v := range comm.Value {
			out = append(out, formatCommunity(v))
		}
	}
	if large != nil {
		for _, v := range large.Values {
			out = append(out, fmt.Sprintf("%d:%d:%d", v.ASN, v.LocalData1, v.LocalData2))
		}
	}
	if c != nil {
		c.comm, c.large, c.comms = comm, large, out
	}
	return out
}

// learnedPath converts one Adj-RIB-In path of peer: the one conversion of
// EachLearned and of TakeLearned's events, so that both say the same
// about a key. cache may be nil.
func (s *Speaker) learnedPath(peer config.Peer, prefix netip.Prefix, p *apiutil.Path, cache *attrCache) model.LearnedPath {
	lp := model.LearnedPath{
		Peer:   peer.Name,
		Prefix: prefix,
		ASPath: []uint32{},
		Reason: ReasonDefaultDeny,
		Age:    ageOf(p),
		Stale:  p.Stale,
	}
	ebgp := peer.ASN != s.global.ASN
	asSet, mpNextHop := false, false
	var originator netip.Addr
	var comm *bgppkt.PathAttributeCommunities
	var large *bgppkt.PathAttributeLargeCommunities
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *bgppkt.PathAttributeOrigin:
			lp.Origin = originName(a.Value)
		case *bgppkt.PathAttributeAsPath:
			lp.ASPath, asSet = cache.asPathOf(a)
		case *bgppkt.PathAttributeNextHop:
			if !mpNextHop {
				lp.NextHop = a.Value
			}
		case *bgppkt.PathAttributeMpReachNLRI:
			// The next hop of an MP_REACH_NLRI path is the one in the
			// attribute (RFC 4760 3), whatever NEXT_HOP says: an IPv6
			// prefix with an IPv4 next hop stays visible as such, and
			// import rejects it.
			lp.NextHop, mpNextHop = a.Nexthop, true
		case *bgppkt.PathAttributeOriginatorId:
			originator = a.Value
		case *bgppkt.PathAttributeMultiExitDisc:
			lp.MED = a.Value
		case *bgppkt.PathAttributeLocalPref:
			// LOCAL_PREF means nothing from an eBGP peer (RFC 4271
			// 5.1.5), and gobgp strips it from such a path in its
			// Adj-RIB-In after announcing the UPDATE to watchers: read
			// either way, it must say the same.
			if !ebgp {
				lp.LocalPref = a.Value
			}
		case *bgppkt.PathAttributeCommunities:
			comm = a
		case *bgppkt.PathAttributeLargeCommunities:
			large = a
		case *bgppkt.PathAttributeExtendedCommunities:
			if lp.LinkBandwidth == nil {
				lp.LinkBandwidth = cache.linkBandwidthOf(a)
			}
		}
	}
	lp.Communities = cache.communitiesOf(comm, large)
	lp.NextHop = linkNextHop(peer, lp.NextHop)
	why := malformed(lp.ASPath, asSet, ebgp)
	if why == "" && comm != nil && len(comm.Value) == 0 {
		// gobgp v4.8.0 decodes it as an empty list and keeps the path
		why = "COMMUNITIES of length 0 (RFC 7606 7.8: treat-as-withdraw)"
	}
	switch {
	case why != "":
		lp.Malformed = why
		lp.Reason = "malformed: " + why + "; never imported"
	case slices.Contains(lp.ASPath, s.global.ASN):
		// gobgp rejects such a path for its Loc-RIB but keeps it in the
		// Adj-RIB-In: it must never be imported either.
		lp.Malformed = fmt.Sprintf("%s: the AS path holds our own ASN %d (RFC 4271 9.1.2)", model.RoutingLoop, s.global.ASN)
		lp.Reason = lp.Malformed + "; never imported"
	case originator.IsValid() && originator == s.global.RouterID:
		lp.Malformed = fmt.Sprintf("%s: ORIGINATOR_ID is our router ID %v (RFC 4456 8)", model.RoutingLoop, originator)
		lp.Reason = lp.Malformed + "; never imported"
	}
	return lp
}

// linkNextHop is the next hop nh of a path from peer, with the link a
// link-local one is on. gobgp keeps only the first of the two next hops
// of RFC 2545 (table_manager.go's ProcessMessage, v4.8.0), and gives a
// link-local one without its zone: from a peer on a link (and from a
// directly connected peer bound to an interface) a link-local next hop
// is on that link, and "::" (BIRD 2 sends "::" and its link-local when
// it has no global address) is the peer itself. Any other next hop is
// left as sent; the import decision judges it.
func linkNextHop(peer config.Peer, nh netip.Addr) netip.Addr {
	direct := peer.OnLink() || peer.Interface != "" && peer.EBGPMultihop == 0
	switch {
	case !direct || !nh.Is6() || nh.Is4In6():
		return nh
	case nh.IsUnspecified() && peer.OnLink() && peer.Address.IsValid():
		return peer.Address
	case nh.IsLinkLocalUnicast() && nh.Zone() == "":
		return nh.WithZone(peer.Interface)
	}
	return nh
}

// malformed says why a path gobgp v4.8.0 accepted must never be imported,
// "" if nothing is wrong with its AS path: gobgp does not check AS 0
// (osrg/gobgp#3590), AS_SET or an empty path from an eBGP peer.
func malformed(asPath []uint32, asSet, ebgp bool) string {
	switch {
	case slices.Contains(asPath, 0):
		return "AS 0 in the AS path (RFC 7607)"
	case asSet:
		return "AS_SET in the AS path (RFC 9774)"
	case ebgp && len(asPath) == 0:
		return "empty AS path from an eBGP peer (RFC 4271 5.1.2)"
	}
	return ""
}

func originName(v uint8) string {
	switch v {
	case bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP:
		return "igp"
	case bgppkt.BGP_ORIGIN_ATTR_TYPE_EGP:
		return "egp"
	case bgppkt.BGP_ORIGIN_ATTR_TYPE_INCOMPLETE:
		return "incomplete"
	}
	return fmt.Sprintf("unknown(%d)", v)
}
