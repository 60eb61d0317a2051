package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// CommunityGracefulShutdown is GRACEFUL_SHUTDOWN (RFC 8326, 65535:0): a
// receiver lowers the route's preference to 0 and moves its traffic to
// other paths before the route goes.
const CommunityGracefulShutdown model.Community = 0xFFFF0000

// DrainPolicy is a drain state (`ovnbgp drain`) as it stands at one
// instant, applied to advertisements by Apply.
type DrainPolicy struct {
	cfg   *config.Config
	state model.Drain
	now   time.Time
}

// NewDrain is the drain state st of the node configured by cfg, at now.
func NewDrain(cfg *config.Config, st model.Drain, now time.Time) DrainPolicy {
	return DrainPolicy{cfg: cfg, state: st, now: now}
}

// Apply applies the drain to what CappedAdvertisements returns, without
// changing its input. For a drained peer, before its withdrawAt every
// advertisement sent (pod subnets, egress IPs, VIPs, aggregates alike)
// carries GRACEFUL_SHUTDOWN on top of its rule's communities and, when the
// peer is iBGP (its ASN is bgp.asn), LOCAL_PREF 0 instead of the rule's;
// Drain says so. From withdrawAt on, they are not sent: they move to held,
// State AdvDrained, with a Reason naming the drain and `ovnbgp undrain`.
// Held-back advertisements (the export cap) stay as they are; the cap
// counts what is sent, which a drain does not change until it withdraws
// everything. Both results are sorted by peer, then prefix.
func (p DrainPolicy) Apply(sent, held []model.Advertisement) ([]model.Advertisement, []model.Advertisement) {
	if p.state.Empty() {
		return sent, held
	}
	type peerDrain struct {
		dp    model.DrainedPeer
		phase model.DrainPhase
		ibgp  bool
	}
	drains := map[string]peerDrain{}
	for _, peer := range p.cfg.BGP.Peers {
		if dp, ok := p.state.For(peer.Name); ok {
			drains[peer.Name] = peerDrain{dp: dp, phase: p.state.Phase(peer.Name, p.now), ibgp: peer.ASN == p.cfg.BGP.ASN}
		}
	}
	if len(drains) == 0 {
		return sent, held
	}
	outSent := make([]model.Advertisement, 0, len(sent))
	outHeld := slices.Clone(held)
	for _, a := range sent {
		d, ok := drains[a.Peer]
		switch {
		case !ok:
			outSent = append(outSent, a)
		case d.phase == model.DrainWithdrawn:
			a.State = model.AdvDrained
			a.Reason = fmt.Sprintf("withdrawn: node drained at %s (wait over at %s); `ovnbgp undrain` restores it",
				d.dp.Since.UTC().Format(time.RFC3339), d.dp.WithdrawAt.UTC().Format(time.RFC3339))
			outHeld = append(outHeld, a)
		default:
			a.Attrs = tagged(a.Attrs, d.ibgp)
			what := "graceful-shutdown"
			if d.ibgp {
				what += " and local-pref 0"
			}
			a.Drain = fmt.Sprintf("tagged %s until %s: node drained at %s",
				what, d.dp.WithdrawAt.UTC().Format(time.RFC3339), d.dp.Since.UTC().Format(time.RFC3339))
			outSent = append(outSent, a)
		}
	}
	SortAdvertisements(outHeld)
	return outSent, outHeld
}

// tagged is a with GRACEFUL_SHUTDOWN added and, for an iBGP peer,
// LOCAL_PREF 0 (RFC 8326 section 4.2); a's slices are not changed.
func tagged(a model.PathAttrs, ibgp bool) model.PathAttrs {
	if !slices.Contains(a.Communities, CommunityGracefulShutdown) {
		a.Communities = append(slices.Clone(a.Communities), CommunityGracefulShutdown)
	}
	if ibgp {
		a.LocalPreference = new(uint32(0))
	}
	return a
}

// drainNote is what explain says about one advertisement's drain, or "".
func drainNote(a model.Advertisement) string {
	switch {
	case a.State == model.AdvDrained:
		return strings.TrimPrefix(a.Reason, "withdrawn: ")
	case a.Drain != "":
		return "drained: " + a.Drain
	}
	return ""
}
