package plan

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// Advertisements returns every (peer, prefix) this node should advertise:
// for each podNetwork rule, the node's pod subnets of the networks the rule's
// globs match, to the rule's peers (all peers when it names none) that speak
// the subnet's address family. When several rules select the same prefix for
// the same peer, the first rule wins, as in a route-map, so the attributes
// a peer sees never depend on map order. The result is sorted by peer, then
// prefix.
func Advertisements(cfg *config.Config, snap model.Snapshot) []model.Advertisement {
	seen := make(map[model.Key]bool)
	var out []model.Advertisement
	for _, rule := range cfg.Advertise {
		if rule.Kind != config.KindPodNetwork {
			continue
		}
		peers := selectPeers(cfg.BGP.Peers, rule.Peers)
		for _, nw := range snap.Networks {
			if !MatchAny(rule.Networks, nw.Name) {
				continue
			}
			for _, sn := range nw.Subnets {
				for _, p := range peers {
					if !speaks(p, sn.Prefix) {
						continue
					}
					a := model.Advertisement{
						Peer:    p.Name,
						Prefix:  sn.Prefix.Masked(),
						Attrs:   attrs(rule),
						Rule:    rule.Name,
						Network: nw.Name,
						Source:  sn.Source,
					}
					if seen[a.Key()] {
						continue
					}
					seen[a.Key()] = true
					out = append(out, a)
				}
			}
		}
	}
	SortAdvertisements(out)
	return out
}

// SortAdvertisements orders advertisements by peer, then prefix.
func SortAdvertisements(advs []model.Advertisement) {
	slices.SortFunc(advs, func(a, b model.Advertisement) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), a.Prefix.Addr().Compare(b.Prefix.Addr()),
			cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
}

// MatchAny reports whether name matches one of the globs, which config
// compiled when it loaded the file (config.Glob: "*" matches any run of
// characters, "/" included, so ["*"] selects every network).
func MatchAny(globs []config.Glob, name string) bool {
	return config.MatchAny(globs, name)
}

// selectPeers returns the configured peers a rule names, in config order;
// no names means every peer.
func selectPeers(all []config.Peer, names []string) []config.Peer {
	if len(names) == 0 {
		return all
	}
	var out []config.Peer
	for _, p := range all {
		if slices.Contains(names, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// speaks reports whether the session with p carries prefix's family.
func speaks(p config.Peer, prefix netip.Prefix) bool {
	fam := config.IPv4
	if prefix.Addr().Is6() {
		fam = config.IPv6
	}
	return slices.Contains(p.Families, fam)
}

func attrs(r config.AdvertiseRule) model.PathAttrs {
	return model.PathAttrs{
		Communities:      slices.Clone(r.Communities),
		LargeCommunities: slices.Clone(r.LargeCommunities),
		LocalPreference:  r.LocalPreference,
		MED:              r.MED,
		ASPathPrepend:    r.ASPathPrepend,
	}
}
