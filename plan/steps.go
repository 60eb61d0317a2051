package plan

import (
	"slices"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// AdvertStep is one step of an advertisement diff, applied after the steps
// before it. Holds are the peers whose announcements and changes in later
// steps wait for the next pass when this step fails.
type AdvertStep struct {
	Diff  AdvertDiff `json:"diff"`
	Holds []string   `json:"holds,omitempty"`
}

// AdvertSteps orders d into the steps the loop applies. A peer with an
// export cap (maxAdvertised) that gets new prefixes has its withdrawals
// applied first, in a step of their own that holds the peer: a prefix the
// cap now lets in (displacing another) must not reach the peer before the
// one it displaces is withdrawn, or the peer holds one more than
// maxAdvertised for a moment (enough for a router's maximum-prefix to reset
// the session). Every other change goes out in one step, as without a
// cap: an uncapped peer whose prefix is replaced is never left without one.
func AdvertSteps(cfg *config.Config, d AdvertDiff) []AdvertStep {
	if d.Empty() {
		return nil
	}
	gets := map[string]bool{}
	for _, a := range slices.Concat(d.Announce, d.Change) {
		gets[a.Peer] = true
	}
	first := map[string]bool{}
	if cfg != nil {
		for _, p := range cfg.BGP.Peers {
			if p.MaxAdvertised > 0 && gets[p.Name] {
				first[p.Name] = true
			}
		}
	}
	var early, rest AdvertDiff
	var holds []string
	for _, a := range d.Withdraw {
		if !first[a.Peer] {
			rest.Withdraw = append(rest.Withdraw, a)
			continue
		}
		early.Withdraw = append(early.Withdraw, a)
		if !slices.Contains(holds, a.Peer) {
			holds = append(holds, a.Peer)
		}
	}
	if len(early.Withdraw) == 0 {
		return []AdvertStep{{Diff: d}}
	}
	slices.Sort(holds)
	rest.Announce, rest.Change = d.Announce, d.Change
	steps := []AdvertStep{{Diff: early, Holds: holds}}
	if !rest.Empty() {
		steps = append(steps, AdvertStep{Diff: rest})
	}
	return steps
}

// Without is d without the announcements and changes to the peers in held
// (a step that holds them failed).
func Without(d AdvertDiff, held map[string]bool) AdvertDiff {
	if len(held) == 0 {
		return d
	}
	drop := func(as []model.Advertisement) []model.Advertisement {
		return slices.DeleteFunc(slices.Clone(as), func(a model.Advertisement) bool { return held[a.Peer] })
	}
	d.Announce, d.Change = drop(d.Announce), drop(d.Change)
	return d
}
