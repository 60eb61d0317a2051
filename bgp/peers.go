package bgp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/osrg/gobgp/v4/api"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// SetPeers makes gobgp's peers equal to peers (by name): it adds the new
// ones, deletes the gone ones and updates the changed ones. Only a peer whose
// session-relevant config changed is reset (the log says which keys
// changed); keys that need no new OPEN nor connection (maxPrefixes,
// connectRetry, passive: config.ResetsSession, which `ovnbgp plan
// --config` uses too) are applied without a reset. It
// keeps going on per-peer errors and returns them joined; Peers reports the
// peers that could not be configured. The advertisements of the peers that
// stay are then applied again, so that a reset peer gets its routes without
// waiting for the next Apply. It withdraws nothing: the advertisements of
// removed peers stay listed by Advertised (pending, "peer is not
// configured") until an Apply withdraws them.
func (s *Speaker) SetPeers(ctx context.Context, peers []config.Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("set peers: speaker is stopped")
	}

	var errs []error
	want := make(map[string]config.Peer, len(peers))
	wantAddr := make(map[netip.Addr]string, len(peers))
	peerErrs := map[string]string{}
	for _, p := range peers {
		p = withPeerDefaults(p)
		err := s.checkPeer(p)
		if err == nil {
			if _, dup := want[p.Name]; dup {
				err = errors.New("duplicate peer name")
			} else if other, dup := wantAddr[p.Address]; dup {
				err = fmt.Errorf("address %v is already used by peer %q", p.Address, other)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %q: %w", p.Name, err))
			peerErrs[p.Name] = err.Error()
			if old, ok := s.peers[p.Name]; ok && want[p.Name].Name == "" {
				// Bad input changes nothing that was working.
				want[p.Name] = old
				wantAddr[old.Address] = p.Name
			}
			continue
		}
		want[p.Name] = p
		wantAddr[p.Address] = p.Name
	}

	// Deletions first: a new or changed peer may reuse a deleted address.
	reset := map[string]bool{}
	for _, name := range sortedKeys(s.peers) {
		old := s.peers[name]
		if _, ok := want[name]; ok {
			continue
		}
		if err := s.deletePeer(ctx, old); err != nil {
			errs = append(errs, err)
			peerErrs[name] = err.Error()
			continue
		}
		s.log.Info("peer deleted", zap.String("peer", name), zap.Stringer("address", old.Address))
	}
	for _, name := range sortedKeys(want) {
		p := want[name]
		old, exists := s.peers[name]
		if !exists {
			continue
		}
		changed := config.PeerChanges(old, p)
		switch {
		case len(changed) == 0:
			s.peers[name] = p // e.g. a new passwordFile holding the same secret
			s.sess.setPeer(p)
		case !config.ResetsSession(changed):
			// Keys applied in place (config.ResetsSession): maxPrefixes
			// (gobgp's limit, armed from the bound: prefixlimit.go),
			// connectRetry (gobgp takes a timer change without a reset;
			// the dialer gets it from dialFor below), passive (the
			// dialer's alone: gobgp's side is always passive) and bfd (on
			// or off, or new timers, for the running session: bfd.go).
			limit := slices.Contains(changed, "maxPrefixes")
			b := s.sess.bound(p.Address)
			var was [2]bool
			if b != nil && limit {
				was = b.armed
				b.rearm(p)
			}
			s.sess.mu.Lock()
			ss := s.sess.all[p.Address]
			wasBFD := ss != nil && ss.bfdOn
			bfdOn := false
			if ss != nil {
				ss.bfdOn = p.BFD.Enabled && ss.state == model.StateEstablished
				bfdOn = ss.bfdOn
				if ss.bfdOn != wasBFD {
					ss.bfd, ss.bfdSince = model.BFDDown, time.Now()
				}
			}
			s.sess.mu.Unlock()
			if bfdOn {
				s.bfd.wake()
			}
			if _, err := s.bgp.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: s.apiPeer(p)}); err != nil {
				if b != nil && limit {
					b.armed = was
				}
				if ss != nil {
					s.sess.mu.Lock()
					ss.bfdOn = wasBFD
					s.sess.mu.Unlock()
					if wasBFD {
						s.bfd.wake()
					}
				}
				err = fmt.Errorf("peer %q: update %s: %w", name, strings.Join(changed, ", "), err)
				errs = append(errs, err)
				peerErrs[name] = err.Error()
				continue
			}
			if b != nil && limit {
				b.setTriggers(p)
				s.limit.wake()
			}
			s.peers[name] = p
			s.sess.setPeer(p)
			s.journal.markResync(name)
			s.log.Info("peer updated without a session reset", zap.String("peer", name), zap.Strings("changed", changed))
			if limit {
				s.reenableNow(ctx, p)
			}
		default:
			// Deleted now, added back below with the new peers, so that
			// two peers may swap addresses.
			s.log.Info("peer config changed, resetting its session", zap.String("peer", name), zap.Strings("changed", changed))
			if err := s.deletePeer(ctx, old); err != nil {
				errs = append(errs, err)
				peerErrs[name] = err.Error()
				continue
			}
			reset[name] = true
		}
	}
	for _, name := range sortedKeys(want) {
		p := want[name]
		if _, exists := s.peers[name]; exists {
			continue
		}
		if err := s.addPeer(ctx, p); err != nil {
			errs = append(errs, err)
			peerErrs[name] = err.Error()
			continue
		}
		if !reset[name] {
			s.log.Info("peer added", zap.String("peer", name), zap.Stringer("address", p.Address), zap.Uint32("asn", p.ASN))
		}
	}
	if err := s.listenFor(); err != nil {
		errs = append(errs, err)
	}
	s.dialFor()
	s.peerErrs = peerErrs

	// The advertisements of the peers that stay are checked again (a
	// reset peer may have a new address or families). Those of removed
	// peers stay as they are: gobgp no longer sends them, Advertised
	// lists them as pending, and the daemon's next plan withdraws them.
	var keep []model.Advertisement
	for _, k := range sortedAdvKeys(s.adv.member) {
		if _, ok := s.peers[k.Peer]; ok {
			keep = append(keep, s.adv.member[k].advertisement())
		}
	}
	if err := s.reconcile(ctx, keep, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// listenFor tells the listener which peers it may accept, with their TCP
// MD5 keys and GTSM settings; the caller holds mu.
func (s *Speaker) listenFor() error {
	if s.tr.ln == nil {
		return nil
	}
	lp := make(map[netip.Addr]listenPeer, len(s.peers))
	for _, p := range s.peers {
		x := listenPeer{name: p.Name, asn: p.ASN, source: p.SourceAddress, password: p.Password, iface: p.Interface}
		if p.TTLSecurity {
			x.minTTL = 256 - max(int(p.EBGPMultihop), 1)
		}
		lp[p.Address] = x
	}
	return s.tr.ln.setPeers(lp)
}

// dialFor tells the dialer which peers to dial: those that are not
// passive; the caller holds mu.
func (s *Speaker) dialFor() {
	dp := make(map[netip.Addr]dialPeer, len(s.peers))
	for _, p := range s.peers {
		if !p.Passive {
			dp[p.Address] = dialPeerOf(p, s.global.ASN)
		}
	}
	s.tr.dial.setPeers(dp)
}

func (s *Speaker) addPeer(ctx context.Context, p config.Peer) error {
	s.sess.add(p)
	s.journal.markResync(p.Name)
	if err := s.bgp.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(p)}); err != nil {
		s.sess.remove(p.Address)
		return fmt.Errorf("peer %q: add %v: %w", p.Name, p.Address, err)
	}
	s.peers[p.Name] = p
	if p.MaxPrefixes > 0 {
		s.limit.wake() // its audit timer (limitLoop)
	}
	return nil
}

func (s *Speaker) deletePeer(ctx context.Context, p config.Peer) error {
	s.tr.dial.remove(p.Address) // at once: no connection for it reaches gobgp now
	s.tr.gate.forget(p.Address)
	if err := s.bgp.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
		return fmt.Errorf("peer %q: delete %v: %w", p.Name, p.Address, err)
	}
	delete(s.peers, p.Name)
	s.sess.remove(p.Address)
	s.journal.markResync(p.Name)
	return nil
}

// maxAllowOwnAS is the most gobgp's allow-own-as takes (uint8): a path
// with our ASN more often than that still gets no path event (doc.go).
const maxAllowOwnAS = 255

// checkPeer rejects what gobgp would refuse or silently misread.
func (s *Speaker) checkPeer(p config.Peer) error {
	switch {
	case p.Name == "":
		return errors.New("name is empty")
	case !p.Address.IsValid():
		return errors.New("address is not set")
	case p.ASN == 0:
		return errors.New("asn is not set")
	case p.Passive && listenPort(s.global.ListenPort) < 0:
		return errors.New("passive peer can never connect: bgp.listenPort is -1")
	case p.Port < 0 || p.Port > 65535:
		return fmt.Errorf("port %d is out of range", p.Port)
	case p.SourceAddress.IsValid() && p.SourceAddress.Is4() != p.Address.Is4():
		return fmt.Errorf("source address %v and address %v are of different families", p.SourceAddress, p.Address)
	}
	for _, f := range p.Families {
		if f != config.IPv4 && f != config.IPv6 {
			return fmt.Errorf("unknown family %q", f)
		}
	}
	return nil
}

// withPeerDefaults fills what config defaulting would, for callers that
// construct config.Peer literally.
func withPeerDefaults(p config.Peer) config.Peer {
	p.Address = p.Address.Unmap()
	if len(p.Families) == 0 {
		switch {
		case p.OnLink():
			p.Families = []config.Family{config.IPv4, config.IPv6}
		case p.Address.Is6():
			p.Families = []config.Family{config.IPv6}
		default:
			p.Families = []config.Family{config.IPv4}
		}
	}
	fams := slices.Clone(p.Families)
	slices.Sort(fams)
	p.Families = slices.Compact(fams)
	return p
}

// apiPeer is p as gobgp's AddPeer/UpdatePeer want it.
func (s *Speaker) apiPeer(p config.Peer) *api.Peer {
	b := s.sess.bound(p.Address)
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			AuthPassword:    p.Password,
			Description:     p.Name,
			// gobgp keeps a path whose AS path holds our ASN more than
			// this many times in the Adj-RIB-In but leaves it out of
			// its path events; ovnbgp marks every such path malformed
			// itself (learnedPath), and the import policy keeps it out
			// of the Loc-RIB: the maximum lets such paths (a peer
			// reflecting our own routes) reach TakeLearned.
			AllowOwnAsn: maxAllowOwnAS,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      seconds(p.ConnectRetry),
			HoldTime:          seconds(p.HoldTime),
			KeepaliveInterval: seconds(p.KeepaliveTime),
			// After it sends Cease/Administrative Reset (in ovnbgp: only
			// when BFD goes down, bfd.go), gobgp keeps the peer Idle this
			// long (its default: 30 s); the session comes back as soon
			// as the link does, at the pace of connectRetry.
			IdleHoldTimeAfterReset: seconds(p.ConnectRetry),
		}},
		Transport: &api.Transport{
			// ovnbgp dials (dialer.go): gobgp only ever takes connections
			// handed to it.
			PassiveMode:   true,
			RemotePort:    uint32(p.Port),
			BindInterface: p.Interface,
		},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.BFD.Enabled && s.sess.bfdRunning(p.Address) {
		// Only while Established (bfd.go).
		ap.Bfd = bfdConfig(p)
	}
	switch {
	case p.TTLSecurity:
		// GTSM (RFC 5082): send with TTL 255, accept only what arrives
		// from at most ebgpMultihop hops away (1 when directly connected).
		hops := max(int(p.EBGPMultihop), 1)
		ap.TtlSecurity = &api.TtlSecurity{Enabled: true, TtlMin: uint32(256 - hops)}
	case p.EBGPMultihop > 0:
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihop)}
	}
	gr := s.global.GracefulRestart
	if gr.Enabled {
		rt := seconds(gr.RestartTime)
		if rt == 0 {
			rt = uint64(config.DefaultRestartTime / time.Second)
		}
		rt = min(rt, 4095) // 12 bits in the capability
		ap.GracefulRestart = &api.GracefulRestart{
			Enabled:     true,
			RestartTime: uint32(rt),
			// Every session of ovnbgp opens as a restarting speaker
			// (RFC 4724 4.1): the OPEN carries the Restart State bit and,
			// per family, the Forwarding State bit. Forwarding really is
			// preserved (OVN forwards, ovnbgp only advertises), and
			// without that bit a helper such as FRR drops our stale
			// routes the moment the new session opens, before our
			// UPDATEs arrive: a withdraw and re-announce on every
			// restart. The price: gobgp defers our UPDATEs until every
			// peer sent End-of-RIB, or deferralTime passed when a peer
			// is down; the stale routes cover that time.
			LocalRestarting: true,
			DeferralTime:    uint32(min(rt, grDeferral)),
		}
	}
	for _, f := range p.Families {
		fam := apiFamily(f)
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: fam, Enabled: true}}
		if gr.Enabled {
			// Without this the capability lists no family and peers keep
			// nothing stale.
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		// gobgp's limit only while armed (prefixlimit.go); a peer
		// without a bound (not added yet by addPeer) has it.
		if p.MaxPrefixes > 0 && (b == nil || b.armed[famIdx(f)]) {
			as.PrefixLimits = &api.PrefixLimit{Family: fam, MaxPrefixes: p.MaxPrefixes}
		}
		ap.AfiSafis = append(ap.AfiSafis, as)
	}
	return ap
}

// Peers returns the live state of every configured peer, sorted by name,
// including those gobgp refused (state unknown, LastError saying why).
// Accepted counts are 0: gobgp's import policy rejects everything (RFC 8212
// default deny) and acceptance by ovnbgp's import rules is the daemon's.
func (s *Speaker) Peers(ctx context.Context) ([]model.PeerStatus, error) {
	s.mu.Lock()
	cfg := make(map[netip.Addr]config.Peer, len(s.peers))
	for _, p := range s.peers {
		cfg[p.Address] = p
	}
	var out []model.PeerStatus
	cfgErrs := make(map[string]string, len(s.peerErrs))
	for name, e := range s.peerErrs {
		if _, ok := s.peers[name]; !ok {
			out = append(out, model.PeerStatus{Name: name, State: model.StateUnknown, LastError: "not configured: " + e})
		} else {
			cfgErrs[name] = "last config change not applied: " + e
		}
	}
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return nil, errors.New("list peers: speaker is stopped")
	}

	var listed []*api.Peer
	err := s.bgp.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		listed = append(listed, p)
	})
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", err)
	}
	seen := map[netip.Addr]bool{}
	for _, p := range listed {
		addr, err := netip.ParseAddr(p.GetState().GetNeighborAddress())
		if err != nil {
			addr, _ = netip.ParseAddr(p.GetConf().GetNeighborAddress())
		}
		c, ok := cfg[addr]
		if !ok {
			continue // deleted meanwhile
		}
		seen[addr] = true
		ps := s.peerStatus(c, p)
		if e, ok := cfgErrs[c.Name]; ok {
			ps.LastError = e
		}
		out = append(out, ps)
	}
	for addr, c := range cfg {
		if !seen[addr] {
			out = append(out, model.PeerStatus{Name: c.Name, Address: addr, ASN: c.ASN, State: model.StateUnknown,
				LastError: "not known to gobgp"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Speaker) peerStatus(c config.Peer, p *api.Peer) model.PeerStatus {
	st := p.GetState()
	ps := model.PeerStatus{
		Name:    c.Name,
		Address: c.Address,
		ASN:     c.ASN,
		State:   apiState(st.GetSessionState()),
	}
	if id, err := netip.ParseAddr(st.GetRouterId()); err == nil && !id.IsUnspecified() {
		ps.RouterID = id
	}
	if ps.State == model.StateEstablished {
		if la, err := netip.ParseAddr(p.GetTransport().GetLocalAddress()); err == nil && !la.IsUnspecified() {
			ps.LocalAddress = la
		}
	}
	timers := p.GetTimers().GetState()
	s.sess.mu.Lock()
	var fams, eorGot map[config.Family]bool
	if c.OnLink() {
		ps.Interface = c.Interface
	}
	if ss := s.sess.all[c.Address]; ss != nil {
		ps.Since = ss.since
		ps.LastError, ps.LastErrorAt = ss.lastError, ss.lastErrorAt
		if ps.State != model.StateEstablished && ps.LastError == "" {
			if ps.LastError = silentFailure(c, ss.down, time.Now()); ps.LastError != "" {
				ps.LastErrorAt = ss.down
			}
		}
		if ps.State == model.StateEstablished {
			// Copies: endOfRIB writes ss.eor under the lock, read below without it.
			fams, eorGot = maps.Clone(ss.families), maps.Clone(ss.eor)
			ps.ExtendedNextHop = ss.enh
		}
	}
	ps.BFD = bfdStatus(c, s.sess.all[c.Address])
	s.sess.mu.Unlock()
	if ps.State == model.StateEstablished && fams != nil {
		var missing []string
		for _, f := range c.Families {
			if !fams[f] {
				missing = append(missing, string(f))
			}
		}
		if slices.Contains(c.Families, config.IPv4) && fams[config.IPv4] && c.TransportIs6() && !ps.ExtendedNextHop {
			ps.LastError, ps.LastErrorAt = "ipv4 "+noExtendedNextHop, ps.Since
		}
		if len(missing) > 0 {
			ps.LastError = fmt.Sprintf("family %s not negotiated: the peer did not offer it, so nothing of it is sent or received; enable it on the peer or remove it from families",
				strings.Join(missing, ", "))
			ps.LastErrorAt = ps.Since
		}
	}
	if ps.State == model.StateEstablished && timers.GetUptime() != nil && timers.GetUptime().GetSeconds() > 0 {
		// gobgp's uptime is to the second; keep the event's finer time
		// when both agree.
		if up := timers.GetUptime().AsTime(); ps.Since.IsZero() || ps.Since.Before(up.Add(-time.Second)) {
			ps.Since = up
		}
	}
	// End-of-RIB: the markers the peer sent in this session (onEndOfRIB),
	// per negotiated family. Not gobgp's EndOfRibReceived: gobgp also sets
	// it, with no marker received, when ovnbgp restarts and the peer's
	// OPEN has the Restart State bit (RFC 4724 4.1: do not wait for it).
	eor, negotiatedAny := true, false
	for _, f := range c.Families {
		fc := model.FamilyCounts{Family: string(f), Negotiated: fams[f]}
		if fc.Negotiated && f == config.IPv4 && c.TransportIs6() && !ps.ExtendedNextHop {
			fc.Withheld = noExtendedNextHop
		}
		want := apiFamily(f)
		for _, as := range p.GetAfiSafis() {
			fam := as.GetState().GetFamily()
			if fam == nil || fam.Afi != want.Afi || fam.Safi != want.Safi {
				continue
			}
			fc.Received = int(as.GetState().GetReceived())
			fc.Advertised = int(as.GetState().GetAdvertised())
			if fc.Negotiated {
				negotiatedAny = true
				eor = eor && eorGot[f]
			}
		}
		ps.Families = append(ps.Families, fc)
	}
	ps.EndOfRIB = ps.State == model.StateEstablished && negotiatedAny && eor
	return ps
}

// noExtendedNextHop is why IPv4 is withheld from an IPv6 session whose
// peer did not offer the extended next hop capability.
const noExtendedNextHop = "withheld: the peer did not offer the extended next hop capability for IPv4 (RFC 8950), so IPv4 prefixes with an IPv6 next hop would be treated as withdrawn; enable it on the peer (FRR: neighbor X capability extended-nexthop; BIRD: extended next hop on)"

// withholdIPv4 says whether the plan must send p no IPv4 prefix
// (model.PeerSync.WithholdIPv4); the caller holds sess.mu.
func withholdIPv4(p config.Peer, ss *session) bool {
	return ss.enhKnown && !ss.enh && p.TransportIs6() && slices.Contains(p.Families, config.IPv4)
}

func apiFamily(f config.Family) *api.Family {
	if f == config.IPv6 {
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

// reenableNow brings a session held down by its prefix limit back at once
// (its limit just changed); the caller holds mu. If the peer still sends too
// much, gobgp takes it down again.
func (s *Speaker) reenableNow(ctx context.Context, p config.Peer) {
	s.sess.mu.Lock()
	ss := s.sess.all[p.Address]
	held := ss != nil && ss.reenable != nil
	if held {
		ss.reenable.stop()
		ss.reenable = nil
	}
	s.sess.mu.Unlock()
	if !held {
		return
	}
	if err := s.bgp.EnablePeer(ctx, &api.EnablePeerRequest{Address: p.Address.String()}); err != nil {
		s.log.Warn("re-enabling a peer after its prefix limit changed failed", zap.String("peer", p.Name), zap.Error(err))
		return
	}
	s.log.Info("peer re-enabled: its prefix limit changed", zap.String("peer", p.Name))
}

// grDeferral bounds, in seconds, how long a restarting ovnbgp withholds
// UPDATEs waiting for every peer's End-of-RIB (a peer that is down would
// otherwise hold everyone's routes for gobgp's default of 360 s).
const grDeferral = 10

// silentFailure explains a session that has not come up for a while and
// got no NOTIFICATION: the peer never answers. A TCP MD5 mismatch looks
// exactly like this (the kernel drops the segments), so say so.
func silentFailure(c config.Peer, down, now time.Time) string {
	wait := max(3*c.ConnectRetry, 15*time.Second)
	if down.IsZero() || now.Sub(down) < wait {
		return ""
	}
	for_ := now.Sub(down).Round(time.Second)
	md5 := "TCP MD5 passwords on both sides (a mismatch is silent)"
	if c.Password == "" {
		md5 = "that the peer expects no TCP MD5 password"
	}
	if c.Passive {
		return fmt.Sprintf("no session for %s: the peer has not connected to us (passive); check its neighbor config for this node and %s", for_, md5)
	}
	port := c.Port
	if port == 0 {
		port = 179
	}
	via := ""
	switch {
	case c.Interface != "" && c.SourceAddress.IsValid():
		via = fmt.Sprintf(", that it is reachable through interface %s from %s", c.Interface, c.SourceAddress)
	case c.Interface != "":
		via = fmt.Sprintf(", that it is reachable through interface %s", c.Interface)
	case c.SourceAddress.IsValid():
		via = fmt.Sprintf(", that it routes back to %s", c.SourceAddress)
	}
	return fmt.Sprintf("no session for %s: connecting to %s is refused or gets no answer; check the address and port%s, that the peer has this node as a neighbor, and %s",
		for_, netip.AddrPortFrom(c.Address, uint16(port)), via, md5)
}

func pktFamily(f config.Family) bgppkt.Family {
	if f == config.IPv6 {
		return bgppkt.RF_IPv6_UC
	}
	return bgppkt.RF_IPv4_UC
}

func apiState(st api.PeerState_SessionState) model.SessionState {
	switch st {
	case api.PeerState_SESSION_STATE_IDLE:
		return model.StateIdle
	case api.PeerState_SESSION_STATE_CONNECT:
		return model.StateConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		return model.StateActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		return model.StateOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return model.StateOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return model.StateEstablished
	}
	return model.StateUnknown
}

func fsmState(st bgppkt.FSMState) model.SessionState {
	switch st {
	case bgppkt.BGP_FSM_IDLE:
		return model.StateIdle
	case bgppkt.BGP_FSM_CONNECT:
		return model.StateConnect
	case bgppkt.BGP_FSM_ACTIVE:
		return model.StateActive
	case bgppkt.BGP_FSM_OPENSENT:
		return model.StateOpenSent
	case bgppkt.BGP_FSM_OPENCONFIRM:
		return model.StateOpenConfirm
	case bgppkt.BGP_FSM_ESTABLISHED:
		return model.StateEstablished
	}
	return model.StateUnknown
}

// seconds rounds d up to whole seconds (gobgp's timer unit); 0 stays 0,
// which gobgp reads as its default.
func seconds(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Second - 1) / time.Second)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sortedAdvKeys returns the keys of m in peer, then prefix order.
func sortedAdvKeys[V any](m map[model.Key]V) []model.Key {
	keys := make([]model.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	return keys
}
