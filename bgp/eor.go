package bgp

import (
	"maps"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// Sync says, per configured peer, what fail static and graceful restart
// read on every pass (model.PeerSync): whether its session is Established
// and the peer sent an End-of-RIB marker for every family negotiated in it
// (the same as PeerStatus.EndOfRIB), when it last sent an UPDATE, and the
// graceful-restart capability of its last OPEN, from the speaker's own
// event state only. Peers asks gobgp for every peer's state, and gobgp
// counts each Adj-RIB-In by walking it; this costs nothing, so the daemon
// can ask on every pass.
func (s *Speaker) Sync() map[string]model.PeerSync {
	s.mu.Lock()
	cfg := maps.Clone(s.peers)
	s.mu.Unlock()
	out := make(map[string]model.PeerSync, len(cfg))
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	for name, p := range cfg {
		ss := s.sess.all[p.Address]
		if ss == nil {
			out[name] = model.PeerSync{}
			continue
		}
		ps := model.PeerSync{Established: ss.state == model.StateEstablished, Since: ss.since,
			LastUpdate: ss.lastUpdate, GR: ss.gr, Down: ss.leftAt, Graceful: ss.graceful}
		if ps.Established {
			ps.Down, ps.Graceful = time.Time{}, false
		}
		if ps.Established && ss.families != nil {
			eor, negotiated := true, false
			for _, f := range p.Families {
				if ss.families[f] {
					negotiated = true
					eor = eor && ss.eor[f]
				}
				if ss.eor[f] {
					if ps.EndOfRIBFamilies == nil {
						ps.EndOfRIBFamilies = map[string]bool{}
					}
					ps.EndOfRIBFamilies[string(f)] = true
				}
			}
			ps.EndOfRIB = negotiated && eor
		}
		ps.WithholdIPv4 = withholdIPv4(p, ss)
		out[name] = ps
	}
	return out
}
