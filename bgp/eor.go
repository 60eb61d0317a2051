package bgp

import (
	"maps"

	"github.com/ovnbgp/ovnbgp/model"
)

// EndOfRIB says, per configured peer, whether its session is Established
// and the peer sent an End-of-RIB marker for every family negotiated in
// it: the same as PeerStatus.EndOfRIB, from the speaker's own event state
// only. Peers asks gobgp for every peer's state, and gobgp counts each
// Adj-RIB-In by walking it; this costs nothing, so the daemon can ask on
// every pass.
func (s *Speaker) EndOfRIB() map[string]bool {
	s.mu.Lock()
	cfg := maps.Clone(s.peers)
	s.mu.Unlock()
	out := make(map[string]bool, len(cfg))
	s.st.Lock()
	defer s.st.Unlock()
	for name, p := range cfg {
		ss := s.sessions[p.Address]
		if ss == nil || ss.state != model.StateEstablished || ss.families == nil {
			out[name] = false
			continue
		}
		eor, negotiated := true, false
		for _, f := range p.Families {
			if ss.families[f] {
				negotiated = true
				eor = eor && ss.eor[f]
			}
		}
		out[name] = negotiated && eor
	}
	return out
}
