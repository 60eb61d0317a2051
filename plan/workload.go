package plan

import (
	"net/netip"
	"slices"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// workloadSkip is what a workloadIP rule does with a workload address at
// one moment (workloadIPSkip): the zero value selects it with the rule's
// attributes. The text is made only when asked for (explain).
type workloadSkip struct {
	kind workloadSkipKind
	// handover: selected, with the rule's handover attributes (leaving,
	// or left and the hold not over).
	handover bool
	// name is the network, namespace, pod or handover state not
	// selected.
	name string
	// since and end are when the VM left and when its hold is over
	// (left).
	since, end time.Time
	hold       time.Duration
}

type workloadSkipKind uint8

const (
	wlSelected workloadSkipKind = iota
	wlNetwork
	wlNamespace
	wlPods
	wlArriving
	wlLeftUnknown
	wlHoldOver
	wlUnknownState
)

// workloadIPSkip says whether rule (kind workloadIP) selects w at now,
// and how: docs/config.md, "Live migration". Leaving, and left until
// Since plus the rule's handover holdTime, it is selected with the
// handover attributes; arriving, left at an unknown time (no Since) or
// left longer ago than the hold, not at all.
func workloadIPSkip(rule *config.AdvertiseRule, w *model.WorkloadIP, now time.Time) workloadSkip {
	switch {
	case !MatchAny(rule.Networks, w.Network):
		return workloadSkip{kind: wlNetwork, name: w.Network}
	case len(rule.Namespaces) > 0 && !MatchAny(rule.Namespaces, w.Namespace):
		return workloadSkip{kind: wlNamespace, name: w.Namespace}
	case len(rule.Pods) > 0 && !MatchAny(rule.Pods, w.Namespace+"/"+w.Pod) && (w.VM == "" || !MatchAny(rule.Pods, w.VM)):
		return workloadSkip{kind: wlPods}
	}
	switch w.Handover {
	case model.HandoverNone:
		return workloadSkip{}
	case model.HandoverLeaving:
		return workloadSkip{handover: true}
	case model.HandoverLeft:
		if w.Since.IsZero() {
			return workloadSkip{kind: wlLeftUnknown}
		}
		s := workloadSkip{handover: true, since: w.Since, end: w.Since.Add(rule.Handover.HoldTime), hold: rule.Handover.HoldTime}
		if !now.Before(s.end) {
			s.kind, s.handover = wlHoldOver, false
		}
		return s
	case model.HandoverArriving:
		return workloadSkip{kind: wlArriving}
	}
	return workloadSkip{kind: wlUnknownState, name: string(w.Handover)}
}

// skipped says whether the rule does not select the address.
func (s workloadSkip) skipped() bool { return s.kind != wlSelected }

// why says why the rule does not select w, "" when it does.
func (s workloadSkip) why(w *model.WorkloadIP) string {
	switch s.kind {
	case wlNetwork:
		return "network " + s.name + " is not in the rule's networks"
	case wlNamespace:
		return "namespace " + s.name + " is not in the rule's namespaces"
	case wlPods:
		if w.VM != "" {
			return "neither pod " + w.Namespace + "/" + w.Pod + " nor vm " + w.VM + " is in the rule's pods"
		}
		return "pod " + w.Namespace + "/" + w.Pod + " is not in the rule's pods"
	case wlArriving:
		return "arriving: the live migration target is not active here yet"
	case wlLeftUnknown:
		return "left: the VM is active on another node, and when it left this node is unknown: withdrawn"
	case wlHoldOver:
		return "left: the VM left this node at " + s.since.UTC().Format(time.RFC3339) + "; the handover hold of " + s.hold.String() + " is over"
	case wlUnknownState:
		return "handover state " + s.name + " is unknown: not advertised"
	}
	return ""
}

// workloadSource is the Source of an advertisement of w by rule: the
// workload, its handover state when one shows (left: until when it is
// held), and the rows.
func workloadSource(rule *config.AdvertiseRule, w *model.WorkloadIP) string {
	s := w.Workload()
	switch w.Handover {
	case model.HandoverNone:
	case model.HandoverLeft:
		s += " (handover left, held until " + w.Since.Add(rule.Handover.HoldTime).UTC().Format(time.RFC3339) + ")"
	default:
		s += " (handover " + string(w.Handover) + ")"
	}
	if w.Source != "" {
		s += ", " + w.Source
	}
	return s
}

// handoverAttrs are the attributes rule sends to p for a workload address
// it hands over: LOCAL_PREF handover.localPreference (iBGP peers only:
// eBGP peers never get one), the rule's asPathPrepend plus handover's, and
// handover.med when set (else the rule's MED).
func handoverAttrs(cfg *config.Config, rule *config.AdvertiseRule, p config.Peer) model.PathAttrs {
	a := attrs(rule)
	h := rule.Handover
	a.ASPathPrepend = rule.ASPathPrepend + h.ASPathPrepend
	if h.MED != 0 {
		a.MED = h.MED
	}
	a.LocalPreference = nil
	if p.ASN == cfg.BGP.ASN {
		a.LocalPreference = new(h.LocalPreference)
	}
	return a
}

// HandoverEnds is when the handover holds of the workload addresses of
// snap end, as cfg's workloadIP rules hold them (Since plus the rule's
// handover holdTime, for each address that left this node and that the
// rule selects otherwise): ended are the addresses whose hold ended after
// after and by now (after < end <= now), sorted and unique: the
// addresses to name in SnapshotDelta.WorkloadIPs for an update at now;
// next is the first end after now (zero: none), when the selection
// changes again without a change in NB.
func HandoverEnds(cfg *config.Config, snap model.Snapshot, after, now time.Time) (ended []netip.Addr, next time.Time) {
	for i := range cfg.Advertise {
		rule := &cfg.Advertise[i]
		if rule.Kind != config.KindWorkloadIP {
			continue
		}
		for _, w := range snap.WorkloadIPs {
			end, ok := holdEnd(rule, w)
			switch {
			case !ok:
			case end.After(now):
				if next.IsZero() || end.Before(next) {
					next = end
				}
			case end.After(after):
				ended = append(ended, w.IP)
			}
		}
	}
	slices.SortFunc(ended, netip.Addr.Compare)
	return slices.Compact(ended), next
}

// holdEnd is when rule's handover hold of w ends, if w left this node at
// a known time and rule selects it otherwise.
func holdEnd(rule *config.AdvertiseRule, w *model.WorkloadIP) (time.Time, bool) {
	if w.Handover != model.HandoverLeft || w.Since.IsZero() {
		return time.Time{}, false
	}
	// Any moment during the hold: the selection but for time.
	s := workloadIPSkip(rule, w, w.Since)
	return s.end, s.handover
}
