package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// Explanation says why a prefix is or is not imported and advertised:
// what `ovnbgp explain PREFIX` prints. It is plain data (JSON).
type Explanation struct {
	Prefix netip.Prefix `json:"prefix"`
	// Learned are the paths equal to or covering Prefix, with the peer,
	// the rule that decided, and why.
	Learned []model.LearnedPath `json:"learned,omitempty"`
	// StaleWhy says why and until when each of those kept stale through
	// its peer's graceful restart is still imported.
	StaleWhy map[string]string `json:"staleWhy,omitempty"`
	// Protected are the protected prefixes equal to or covering Prefix.
	Protected []model.ProtectedPrefix `json:"protected,omitempty"`
	// Workloads are the pods and VMs of this node with Prefix's address
	// (a host prefix), in snapshot order, with their handover state.
	Workloads []model.WorkloadIP `json:"workloads,omitempty"`
	// OVN and Kernel are where the prefix (or a covering one) is
	// installed now: owned static routes, and kernel routes carrying our
	// protocol.
	OVN    []model.OVNRoute    `json:"ovn,omitempty"`
	Kernel []model.KernelRoute `json:"kernel,omitempty"`
	// Pending are the plan's operations on those prefixes, Held those it
	// holds back.
	PendingOVN    []model.OVNOp    `json:"pendingOVN,omitempty"`
	PendingKernel []model.KernelOp `json:"pendingKernel,omitempty"`
	Held          []Held           `json:"held,omitempty"`
	// Advertised are the desired advertisements equal to or covering
	// Prefix (which rule sends it to which peer); AdvertiseChanges the
	// plan's pending ones.
	Advertised []model.Advertisement `json:"advertised,omitempty"`
	// AdvertiseRules are every advertise rule's verdict on Prefix, in
	// config order.
	AdvertiseRules   []AdvertiseVerdict `json:"advertiseRules,omitempty"`
	AdvertiseChanges AdvertDiff         `json:"advertiseChanges"`
	// Problems are the import problems of the rules that decided.
	Problems []string `json:"problems,omitempty"`
	// Summary is the explanation in sentences, one per line.
	Summary []string `json:"summary"`
}

// AdvertiseVerdict is one advertise rule's verdict on a prefix.
type AdvertiseVerdict struct {
	Rule string               `json:"rule"`
	Kind config.AdvertiseKind `json:"kind"`
	// Selects says the rule selects the prefix; Why says why not, or,
	// when it does, from which NB row and to which peers.
	Selects bool   `json:"selects"`
	Why     string `json:"why"`
}

// Explain gathers everything that decides about prefix: the learned paths
// equal to or covering it and their verdicts, the protected prefixes
// covering it, where it is installed, the workloads it is the address of,
// the pending and held operations, the advertisements, and each advertise
// rule's verdict (cfg nil: none) at now (the handover holds of workload
// addresses). adverts are every advertisement, sent, held back and
// drained: a held back one's Reason says how many its peer selected,
// counted there.
func Explain(cfg *config.Config, prefix netip.Prefix, res ImportResult, adverts []model.Advertisement, p Plan, snap model.Snapshot, host model.Host, now time.Time) Explanation {
	prefix = prefix.Masked()
	e := Explanation{Prefix: prefix}
	if cfg != nil {
		e.AdvertiseRules = advertiseVerdicts(cfg, prefix, snap, adverts, now)
	}
	if prefix.IsSingleIP() {
		for _, w := range snap.WorkloadIPs {
			if w.IP == prefix.Addr() {
				e.Workloads = append(e.Workloads, *w)
			}
		}
	}
	related := func(q netip.Prefix) bool { return covers(q, prefix) }
	var rules []string
	for _, lp := range res.Paths {
		if related(lp.Prefix) {
			e.Learned = append(e.Learned, lp)
			if why, ok := res.StaleWhy[StaleKey(lp.Peer, lp.Prefix)]; ok {
				if e.StaleWhy == nil {
					e.StaleWhy = map[string]string{}
				}
				e.StaleWhy[StaleKey(lp.Peer, lp.Prefix)] = why
			}
			if lp.Rule != "" && !slices.Contains(rules, lp.Rule) {
				rules = append(rules, lp.Rule)
			}
		}
	}
	for _, pp := range res.Protected {
		if related(pp.Prefix) {
			e.Protected = append(e.Protected, pp)
		}
	}
	for _, r := range snap.OwnedRoutes {
		if related(r.Prefix) {
			e.OVN = append(e.OVN, r)
		}
	}
	for _, r := range host.Routes {
		if related(r.Prefix) {
			e.Kernel = append(e.Kernel, r)
		}
	}
	for _, op := range p.OVN {
		if related(op.Route.Prefix) {
			e.PendingOVN = append(e.PendingOVN, op)
		}
	}
	for _, op := range p.Kernel {
		if op.Route != nil && related(op.Route.Prefix) {
			e.PendingKernel = append(e.PendingKernel, op)
		}
	}
	for _, h := range p.Held {
		if h.OVN != nil && related(h.OVN.Route.Prefix) || h.Kernel != nil && h.Kernel.Route != nil && related(h.Kernel.Route.Prefix) {
			e.Held = append(e.Held, h)
		}
	}
	held := false
	for _, a := range adverts {
		if related(a.Prefix) {
			e.Advertised = append(e.Advertised, a)
			held = held || a.State == model.AdvHeldBack
		}
	}
	if held {
		// A held back one says how many its peer selected: every
		// advertisement of the peer in adverts, sent or not.
		selected := map[string]int{}
		for _, a := range adverts {
			selected[a.Peer]++
		}
		ShowSelected(e.Advertised, func(peer string) int { return selected[peer] })
	}
	keep := func(as []model.Advertisement) []model.Advertisement {
		var out []model.Advertisement
		for _, a := range as {
			if related(a.Prefix) {
				out = append(out, a)
			}
		}
		return out
	}
	e.AdvertiseChanges = AdvertDiff{Announce: keep(p.Advertise.Announce), Change: keep(p.Advertise.Change), Withdraw: keep(p.Advertise.Withdraw)}
	for _, pr := range res.Problems {
		for _, r := range rules {
			if strings.HasPrefix(pr, "rule "+r+":") {
				e.Problems = append(e.Problems, pr)
			}
		}
	}
	e.Summary = e.summary()
	return e
}

// summary writes the explanation as sentences.
func (e Explanation) summary() []string {
	var s []string
	if len(e.Learned) == 0 {
		s = append(s, fmt.Sprintf("import: no peer sent %s or a prefix covering it", e.Prefix))
	}
	for _, lp := range e.Learned {
		verdict := "rejected"
		if lp.Accepted {
			verdict = "accepted"
		}
		stale := ""
		if lp.Stale {
			stale = " (stale, kept through the peer's graceful restart)"
			if why := e.StaleWhy[StaleKey(lp.Peer, lp.Prefix)]; why != "" {
				stale = " (stale: " + why + ")"
			}
		}
		s = append(s, fmt.Sprintf("import: peer %s sent %s via %s%s%s: %s: %s", lp.Peer, lp.Prefix, lp.NextHop, bandwidthText(lp.LinkBandwidth), stale, verdict, lp.Reason))
	}
	s = append(s, e.ovnUnweighted()...)
	for _, pp := range e.Protected {
		s = append(s, fmt.Sprintf("protected: %s (%s)", pp.Prefix, pp.Why))
	}
	for _, w := range e.Workloads {
		s = append(s, workloadLine(w))
	}
	for _, r := range e.OVN {
		s = append(s, fmt.Sprintf("installed in OVN: %s on %s via %s, output port %s (rule %s, row %s)", r.Prefix, r.Router, r.NextHop, r.OutputPort, r.Rule, r.UUID))
	}
	for _, r := range e.Kernel {
		s = append(s, fmt.Sprintf("installed in the kernel: %s in table %d%s via %s (protocol %d%s)", r.Prefix, r.Table, vrfText(r.VRF), nextHopsText(r.NextHops), r.Protocol, metricText(r.Metric)))
	}
	if len(e.OVN) == 0 && len(e.Kernel) == 0 {
		s = append(s, fmt.Sprintf("installed: nowhere (no owned OVN row nor kernel route for %s or a prefix covering it)", e.Prefix))
	}
	for _, op := range e.PendingOVN {
		s = append(s, fmt.Sprintf("pending: OVN %s %s on %s via %s (rule %s)", op.Op, op.Route.Prefix, op.Route.Router, op.Route.NextHop, op.Route.Rule))
	}
	for _, op := range e.PendingKernel {
		s = append(s, fmt.Sprintf("pending: kernel %s %s in table %d%s via %s", op.Op, op.Route.Prefix, op.Route.Table, vrfText(op.Route.VRF), nextHopsText(op.Route.NextHops)))
	}
	for _, h := range e.Held {
		switch {
		case h.OVN != nil:
			s = append(s, fmt.Sprintf("held: OVN %s %s on %s via %s: %s", h.OVN.Op, h.OVN.Route.Prefix, h.OVN.Route.Router, h.OVN.Route.NextHop, h.Reason))
		case h.Kernel != nil && h.Kernel.Route != nil:
			s = append(s, fmt.Sprintf("held: kernel %s %s in table %d: %s", h.Kernel.Op, h.Kernel.Route.Prefix, h.Kernel.Route.Table, h.Reason))
		}
	}
	for _, pr := range e.Problems {
		s = append(s, "problem: "+pr)
	}
	if len(e.Advertised) == 0 {
		s = append(s, fmt.Sprintf("advertise: no rule advertises %s or a prefix covering it", e.Prefix))
	}
	for _, a := range e.Advertised {
		if a.State == model.AdvHeldBack || a.State == model.AdvDrained {
			s = append(s, fmt.Sprintf("advertise: %s not to peer %s, rule %s: %s", a.Prefix, a.Peer, a.Rule, a.Reason))
			continue
		}
		line := fmt.Sprintf("advertise: %s to peer %s by rule %s (network %s, %s)", a.Prefix, a.Peer, a.Rule, a.Network, a.Source)
		if attrs := a.Attrs.String(); attrs != "" {
			line += "; attributes: " + attrs
		}
		if a.Drain != "" {
			line += "; drained: " + a.Drain
		}
		s = append(s, line)
	}
	for _, v := range e.AdvertiseRules {
		verdict := "does not select it"
		if v.Selects {
			verdict = "selects it"
		}
		s = append(s, fmt.Sprintf("advertise rule %s (%s) %s: %s", v.Rule, v.Kind, verdict, v.Why))
	}
	for _, a := range e.AdvertiseChanges.Announce {
		s = append(s, fmt.Sprintf("pending: announce %s to peer %s", a.Prefix, a.Peer))
	}
	for _, a := range e.AdvertiseChanges.Change {
		s = append(s, fmt.Sprintf("pending: change the attributes of %s to peer %s", a.Prefix, a.Peer))
	}
	for _, a := range e.AdvertiseChanges.Withdraw {
		s = append(s, fmt.Sprintf("pending: withdraw %s from peer %s", a.Prefix, a.Peer))
	}
	return s
}

// advertiseVerdicts says, for each advertise rule, whether it selects
// prefix itself (a pod subnet of this node, an egress IP it holds, a
// Service VIP, a workload address) at now and why, with the same checks as
// Advertisements.
func advertiseVerdicts(cfg *config.Config, prefix netip.Prefix, snap model.Snapshot, adverts []model.Advertisement, now time.Time) []AdvertiseVerdict {
	var out []AdvertiseVerdict
	var local *localAddrs
	host := prefix.IsSingleIP()
	for i := range cfg.Advertise {
		rule := &cfg.Advertise[i]
		v := AdvertiseVerdict{Rule: rule.Name, Kind: rule.Kind}
		var whyNot []string
		source, handover := "", ""
		// An aggregate this rule sends, or the aggregates a member is in
		// (one per peer), with what became of each.
		var inAggregate []model.Advertisement
		for _, a := range adverts {
			if a.Rule != rule.Name || len(a.Members) == 0 {
				continue
			}
			if a.Prefix == prefix {
				v.Selects, source = true, a.Source
				break
			}
			if slices.Contains(a.Members, prefix) {
				inAggregate = append(inAggregate, a)
			}
		}
		if len(inAggregate) > 0 && !v.Selects {
			v.Why = aggregateFate(inAggregate)
			out = append(out, v)
			continue
		}
		switch {
		case v.Selects:
		case rule.Kind == config.KindPodNetwork:
			for _, nw := range snap.Networks {
				for _, sn := range nw.Subnets {
					if sn.Prefix.Masked() != prefix {
						continue
					}
					if MatchAny(rule.Networks, nw.Name) {
						v.Selects, source = true, sn.Source
					} else {
						whyNot = append(whyNot, "network "+nw.Name+" is not in the rule's networks")
					}
				}
			}
			if !v.Selects && len(whyNot) == 0 {
				whyNot = append(whyNot, "not a pod subnet of this node")
			}
		case rule.Kind == config.KindEgressIP:
			for _, eip := range snap.EgressIPs {
				if !host || eip.IP != prefix.Addr() {
					continue
				}
				if why := egressIPSkip(rule, eip); why != "" {
					whyNot = append(whyNot, "egress IP "+eip.Name+": "+why)
				} else {
					v.Selects, source = true, eip.Source
				}
			}
			if !v.Selects && len(whyNot) == 0 {
				whyNot = append(whyNot, "not an egress IP this node holds")
			}
		case rule.Kind == config.KindLoadBalancerIP:
			if local == nil {
				local = newLocalAddrs(snap)
			}
			for _, vip := range snap.ServiceVIPs {
				if !host || vip.VIP != prefix.Addr() {
					continue
				}
				if why := serviceVIPSkip(cfg, snap, rule, vip, local); why.skipped() {
					whyNot = append(whyNot, "Service "+vip.Service+": "+why.String())
				} else if !v.Selects {
					v.Selects, source = true, "Service "+vip.Service+", "+vip.Source
				}
			}
			if !v.Selects && len(whyNot) == 0 {
				whyNot = append(whyNot, "not a VIP of a Service in NB")
			}
		case rule.Kind == config.KindWorkloadIP:
			for _, w := range snap.WorkloadIPs {
				if !host || w.IP != prefix.Addr() {
					continue
				}
				if sk := workloadIPSkip(rule, w, now); sk.skipped() {
					whyNot = append(whyNot, w.Workload()+": "+sk.why(w))
				} else if !v.Selects {
					v.Selects, source = true, workloadSource(rule, w)
					if sk.handover {
						handover = handoverNote(rule, w, sk, now)
					}
				}
			}
			if !v.Selects && len(whyNot) == 0 {
				whyNot = append(whyNot, "not an address of a pod or VM whose port is this node's")
			}
		}
		if !v.Selects {
			v.Why = strings.Join(whyNot, "; ")
			out = append(out, v)
			continue
		}
		var f fates
		var other, family []string
		for _, p := range selectPeers(cfg.BGP.Peers, rule.Peers) {
			i := slices.IndexFunc(adverts, func(a model.Advertisement) bool {
				return a.Peer == p.Name && a.Prefix == prefix && a.Rule == rule.Name
			})
			switch {
			case !speaks(p, prefix):
				family = append(family, p.Name)
			case i >= 0:
				f.add(adverts[i])
			default:
				other = append(other, p.Name)
			}
		}
		parts := []string{"from " + source}
		if handover != "" {
			parts = append(parts, handover)
		}
		parts = append(parts, f.parts("")...)
		if len(other) > 0 {
			parts = append(parts, "an earlier rule sends it to "+strings.Join(other, ", "))
		}
		if len(family) > 0 {
			parts = append(parts, "not to "+strings.Join(family, ", ")+" (their sessions do not carry this address family)")
		}
		if f.n()+len(other)+len(family) == 0 {
			parts = append(parts, "but the rule names no configured peer")
		}
		v.Why = strings.Join(parts, "; ")
		out = append(out, v)
	}
	return out
}

// workloadLine is explain's sentence on one workload with the address.
func workloadLine(w model.WorkloadIP) string {
	pod := ""
	if w.VM != "" {
		pod = "pod " + w.Namespace + "/" + w.Pod + ", "
	}
	line := fmt.Sprintf("workload: %s is %s (%sport %s, network %s)", w.IP, w.Workload(), pod, w.Port, w.Network)
	at := ""
	if !w.Since.IsZero() {
		at = " since " + w.Since.UTC().Format(time.RFC3339)
	}
	switch w.Handover {
	case model.HandoverNone:
	case model.HandoverLeaving:
		line += "; live migration: leaving" + at + " (the target shows on another node, not active yet)"
	case model.HandoverLeft:
		line += "; live migration: left" + at + " (active on another node)"
	case model.HandoverArriving:
		line += "; live migration: arriving" + at + " (this node is the target, not active yet)"
	default:
		line += "; handover state " + string(w.Handover) + at
	}
	return line
}

// handoverNote says with which attributes a rule hands w over (sk: it
// does) and, when w left, for how long after now.
func handoverNote(rule *config.AdvertiseRule, w *model.WorkloadIP, sk workloadSkip, now time.Time) string {
	h := rule.Handover
	at := fmt.Sprintf("localpref %d to iBGP peers, asPathPrepend %d (%d + handover %d)", h.LocalPreference,
		rule.ASPathPrepend+h.ASPathPrepend, rule.ASPathPrepend, h.ASPathPrepend)
	if med := cmp.Or(h.MED, rule.MED); med != 0 {
		at += fmt.Sprintf(", med %d", med)
	}
	if w.Handover == model.HandoverLeaving {
		return "handover leaving: the live migration target shows on another node: sent with the handover attributes (" + at +
			") so that routers prefer the target once it advertises; held for " + h.HoldTime.String() + " after the VM is active there"
	}
	return fmt.Sprintf("handover left: the VM left this node at %s: sent with the handover attributes (%s) until %s (%s left, of a hold of %s), then withdrawn",
		sk.since.UTC().Format(time.RFC3339), at, sk.end.UTC().Format(time.RFC3339), sk.end.Sub(now).Round(100*time.Millisecond), h.HoldTime)
}

// aggregateFate says which aggregates a member selected by a rule is sent
// in, and to which peers: sent, held back by the export cap, or withdrawn
// by a drain.
func aggregateFate(aggs []model.Advertisement) string {
	var aggPrefixes []string
	var f fates
	for _, a := range aggs {
		if p := a.Prefix.String(); !slices.Contains(aggPrefixes, p) {
			aggPrefixes = append(aggPrefixes, p)
		}
		f.add(a)
	}
	parts := []string{"selected, as a member of the aggregate " + strings.Join(aggPrefixes, ", ") + " (aggregateLength)"}
	return strings.Join(append(parts, f.parts("the aggregate is ")...), "; ")
}

// fates sorts the peers of advertisements by what became of them.
type fates struct {
	sent, held, drained []string
}

func (f *fates) add(a model.Advertisement) {
	switch {
	case a.State == model.AdvHeldBack:
		f.held = append(f.held, a.Peer)
	case a.State == model.AdvDrained:
		f.drained = append(f.drained, a.Peer+": "+drainNote(a))
	case a.Drain != "":
		f.sent = append(f.sent, a.Peer+" ("+drainNote(a)+")")
	default:
		f.sent = append(f.sent, a.Peer)
	}
}

func (f *fates) n() int { return len(f.sent) + len(f.held) + len(f.drained) }

// parts says it, each part starting with subject.
func (f *fates) parts(subject string) []string {
	var out []string
	if len(f.sent) > 0 {
		out = append(out, subject+"sent to "+strings.Join(f.sent, ", "))
	}
	if len(f.held) > 0 {
		out = append(out, subject+"held back from "+strings.Join(f.held, ", ")+" by the export cap (maxAdvertised)")
	}
	if len(f.drained) > 0 {
		out = append(out, subject+"withdrawn from "+strings.Join(f.drained, "; "))
	}
	return out
}

func vrfText(vrf string) string {
	if vrf == "" {
		return ""
	}
	return " (VRF " + vrf + ")"
}

func nextHopsText(nhs []model.NextHop) string {
	var s []string
	for _, nh := range nhs {
		t := nh.Addr.String()
		if nh.Dev != "" {
			t += " dev " + nh.Dev
		}
		if nh.Weight > 0 {
			t += fmt.Sprintf(" weight %d", nh.Weight)
		}
		s = append(s, t)
	}
	return strings.Join(s, ", ")
}

// bandwidthText is " with link bandwidth ..." for a path carrying it.
func bandwidthText(l *model.LinkBandwidth) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf(" with link bandwidth %g bytes/s (AS %d)", l.BytesPerSecond, l.ASN)
}

// ovnUnweighted says, for each prefix whose accepted paths carry link
// bandwidth and that OVN holds or will hold, that its OVN static routes are
// equal cost: OVN has no weights, only the kernel target weighs next hops
// (issue 21).
func (e Explanation) ovnUnweighted() []string {
	var s []string
	seen := map[netip.Prefix]bool{}
	for _, lp := range e.Learned {
		if !lp.Accepted || lp.LinkBandwidth == nil || seen[lp.Prefix] {
			continue
		}
		inOVN := slices.ContainsFunc(e.OVN, func(r model.OVNRoute) bool { return r.Prefix == lp.Prefix }) ||
			slices.ContainsFunc(e.PendingOVN, func(op model.OVNOp) bool { return op.Op == model.OpAdd && op.Route.Prefix == lp.Prefix })
		if inOVN {
			seen[lp.Prefix] = true
			s = append(s, fmt.Sprintf("weights: the OVN static routes of %s are equal cost: OVN static routes have no weights, so the link bandwidth its paths carry weighs only the kernel route's next hops", lp.Prefix))
		}
	}
	return s
}
