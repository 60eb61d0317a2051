package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// PlanVersion is the format version of a serialised Plan.
const PlanVersion = 1

// Plan is every change ovnbgp would make now: what `ovnbgp plan` prints
// (table or JSON, `--out FILE`), what `ovnbgp apply FILE` applies, and what
// the loop applies in auto mode. It is plain data: JSON round-trips it.
type Plan struct {
	// Version is PlanVersion.
	Version   int       `json:"version"`
	Node      string    `json:"node"`
	CreatedAt time.Time `json:"createdAt"`
	// OVN are the static-route operations: adds, replaces, then deletes.
	OVN []model.OVNOp `json:"ovn,omitempty"`
	// Guards are the gateway routers the OVN operations touch, as read:
	// a manual apply waits (OVSDB wait) on each being unchanged.
	Guards []model.OVNGuard `json:"guards,omitempty"`
	// Kernel are the host operations: VRFs to create, route adds and
	// replaces, ip rule adds, then route and ip rule deletes.
	Kernel []model.KernelOp `json:"kernel,omitempty"`
	// Advertise is the change of what peers are sent.
	Advertise AdvertDiff `json:"advertise"`
	// Held are operations computed but not applied now, each with why.
	Held []Held `json:"held,omitempty"`
}

// Held is an operation the plan holds back: a delete of an owned route (or
// a kernel route losing a next hop) while a peer of its rule (any
// configured peer, for an orphan) has not sent End-of-RIB since the start
// and deferralTime has not passed (fail static).
// Exactly one of OVN and Kernel is set.
type Held struct {
	OVN    *model.OVNOp    `json:"ovn,omitempty"`
	Kernel *model.KernelOp `json:"kernel,omitempty"`
	// Rules are the import rules the operation belongs to.
	Rules  []string `json:"rules,omitempty"`
	Reason string   `json:"reason"`
}

// Counts are the number of operations of each kind in a Plan.
type Counts struct {
	OVNAdd        int `json:"ovnAdd"`
	OVNReplace    int `json:"ovnReplace"`
	OVNDelete     int `json:"ovnDelete"`
	KernelAdd     int `json:"kernelAdd"`
	KernelReplace int `json:"kernelReplace"`
	KernelDelete  int `json:"kernelDelete"`
	VRFAdd        int `json:"vrfAdd"`
	RuleAdd       int `json:"ruleAdd"`
	RuleDelete    int `json:"ruleDelete"`
	Announce      int `json:"announce"`
	Change        int `json:"change"`
	Withdraw      int `json:"withdraw"`
	Held          int `json:"held"`
}

// Counts counts the plan's operations.
func (p Plan) Counts() Counts {
	var c Counts
	for _, op := range p.OVN {
		switch op.Op {
		case model.OpAdd:
			c.OVNAdd++
		case model.OpReplace:
			c.OVNReplace++
		case model.OpDelete:
			c.OVNDelete++
		}
	}
	for _, op := range p.Kernel {
		switch {
		case op.VRF != nil:
			c.VRFAdd++
		case op.PolicyRule != nil && op.Op == model.OpDelete:
			c.RuleDelete++
		case op.PolicyRule != nil:
			c.RuleAdd++
		case op.Op == model.OpAdd:
			c.KernelAdd++
		case op.Op == model.OpReplace:
			c.KernelReplace++
		case op.Op == model.OpDelete:
			c.KernelDelete++
		}
	}
	c.Announce, c.Change, c.Withdraw = len(p.Advertise.Announce), len(p.Advertise.Change), len(p.Advertise.Withdraw)
	c.Held = len(p.Held)
	return c
}

// Empty reports whether the plan changes nothing now (held operations
// change nothing).
func (p Plan) Empty() bool {
	return len(p.OVN) == 0 && len(p.Kernel) == 0 && p.Advertise.Empty()
}

// BuildInput is what Build compares: the desired state (the import
// decision, the advertisements) and the observed one.
type BuildInput struct {
	Node   string
	Now    time.Time
	Config *config.Config
	Import ImportResult
	// Adverts are the desired advertisements, Advertised those in effect.
	Adverts, Advertised []model.Advertisement
	// Snapshot and Host are the observed OVN and kernel state.
	Snapshot model.Snapshot
	Host     model.Host
	// Synced says, per peer, that its table is complete since its
	// session started (End-of-RIB, a settled table from a peer that
	// sends none, or bgp.gracefulRestart.deferralTime passed); SyncBy is,
	// per peer not yet synced, when the deferral ends.
	Synced map[string]bool
	SyncBy map[string]time.Time
	// Adopted are the owned routes found installed at start and not
	// announced again since: only their deletes are held (nil: none).
	Adopted *Adopted
	// HoldAll, when set, says why what peers or the host hold is not
	// known this pass (a failed walk, an unreadable kernel): then every
	// delete is held, adopted or not, with this reason.
	HoldAll string
}

// Build computes the plan with the one diff of each kind (DiffOVN,
// DiffKernel, DiffAdvertisements). Fail static: the delete of an Adopted
// route (an OVN row, or a kernel route's next hop) whose rule has a peer
// not yet Synced is Held, so that at start owned routes are adopted, not
// flushed; a kernel route that loses adopted next hops keeps them until
// then, and loses the others at once. Anything learned in this run goes as
// soon as its peer withdraws it. A kernel route's rule is the rule of the
// desired route, else every rule targeting its table or VRF. An adopted
// orphan (its rule is no longer configured, or no rule targets its table
// or VRF) is held until every configured peer is Synced.
func Build(in BuildInput) Plan {
	cfg := in.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	p := Plan{Version: PlanVersion, Node: in.Node, CreatedAt: in.Now}
	r := ruleIndex{cfg: cfg, host: in.Host, desired: in.Import.Kernel}
	// hold is why an adopted route of rules must wait, or "". orphan
	// says why it has no configured rule ("" if it has one): such a
	// route waits for every configured peer.
	hold := func(rules []string, orphan string) string {
		if in.HoldAll != "" {
			return in.HoldAll
		}
		var waiting []string
		var until time.Time
		wait := func(peer string) {
			if !in.Synced[peer] && !slices.Contains(waiting, peer) {
				waiting = append(waiting, peer)
				if by := in.SyncBy[peer]; by.After(until) {
					until = by
				}
			}
		}
		if orphan != "" {
			for _, peer := range cfg.BGP.Peers {
				wait(peer.Name)
			}
		}
		for _, name := range rules {
			if rule, ok := cfg.ImportRule(name); ok {
				for _, peer := range rule.Peers {
					wait(peer)
				}
			}
		}
		if len(waiting) == 0 {
			return ""
		}
		deferral := fmt.Sprintf("%gs", cfg.BGP.GracefulRestart.DeferralTime.Seconds())
		if !until.IsZero() {
			deferral += ", at the latest " + until.UTC().Format(time.RFC3339)
		}
		why := fmt.Sprintf("adopted at start and not announced again: waiting for End-of-RIB from %s or bgp.gracefulRestart.deferralTime (%s) (fail static)",
			strings.Join(waiting, ", "), deferral)
		if orphan != "" {
			why += ": " + orphan + ", so it is held until every configured peer is synced"
		}
		return why
	}

	for _, op := range DiffOVN(in.Import.OVN, in.Snapshot.OwnedRoutes) {
		if op.Op == model.OpDelete && (in.HoldAll != "" || in.Adopted.OVN(op.Route.Key())) {
			if why := hold([]string{op.Route.Rule}, orphanRule(cfg, op.Route.Rule)); why != "" {
				op := op
				p.Held = append(p.Held, Held{OVN: &op, Rules: []string{op.Route.Rule}, Reason: why})
				continue
			}
		}
		p.OVN = append(p.OVN, op)
	}
	p.Guards = guards(in.Snapshot, p.OVN)

	have := map[string]bool{}
	for _, v := range in.Host.VRFs {
		have[v.Name] = true
	}
	for _, v := range in.Import.VRFs {
		if !have[v.Name] {
			v := v
			p.Kernel = append(p.Kernel, model.KernelOp{Op: model.OpAdd, VRF: &v})
		}
	}
	observed := map[model.KernelRouteKey]model.KernelRoute{}
	for _, k := range in.Host.Routes {
		observed[k.Key()] = k
	}
	var kernelDeletes []model.KernelOp
	for _, op := range DiffKernel(in.Import.Kernel, in.Host.Routes) {
		if op.Op != model.OpAdd && op.Route != nil {
			// The adopted next hops this operation drops.
			obs := observed[op.Route.Key()]
			var want []model.NextHop
			if op.Op == model.OpReplace {
				want = op.Route.NextHops
			}
			var keep []model.NextHop
			for _, nh := range obs.NextHops {
				wanted := slices.ContainsFunc(want, func(w model.NextHop) bool { return unweighted(w) == unweighted(nh) })
				if !wanted && (in.HoldAll != "" || in.Adopted.KernelHop(obs.Key(), nh)) {
					// A kept next hop of a weighted route weighs the
					// least (weights.go).
					keep = append(keep, unweighted(nh))
				}
			}
			if len(keep) > 0 {
				rules := r.ofRoute(*op.Route)
				if why := hold(rules, r.orphan(*op.Route, rules)); why != "" {
					held := op
					p.Held = append(p.Held, Held{Kernel: &held, Rules: rules, Reason: why})
					merged := slices.Concat(want, keep)
					model.CanonicalWeights(merged)
					if SameNextHops(merged, obs.NextHops) {
						continue // nothing else changes now
					}
					// The rest goes now: the route keeps only its
					// adopted next hops beside the wanted ones.
					rt := obs
					if op.Op == model.OpReplace {
						rt = *op.Route
					}
					rt.NextHops = merged
					p.Kernel = append(p.Kernel, model.KernelOp{Op: model.OpReplace, Route: &rt})
					continue
				}
			}
		}
		if op.Op == model.OpDelete {
			kernelDeletes = append(kernelDeletes, op)
			continue
		}
		p.Kernel = append(p.Kernel, op)
	}
	ruleAdds, ruleDeletes := diffRules(in.Import.Rules, in.Host.Rules)
	p.Kernel = slices.Concat(p.Kernel, ruleAdds, kernelDeletes, ruleDeletes)
	p.Advertise = DiffAdvertisements(in.Adverts, in.Advertised)
	return p
}

// orphanRule says that rule name is no longer configured, or "".
func orphanRule(cfg *config.Config, name string) string {
	if _, ok := cfg.ImportRule(name); ok {
		return ""
	}
	if name == "" {
		return "it names no import rule"
	}
	return fmt.Sprintf("its rule %s is no longer configured", name)
}

// guards are the routers the OVN operations touch, as the snapshot read
// them.
func guards(snap model.Snapshot, ops []model.OVNOp) []model.OVNGuard {
	var out []model.OVNGuard
	for _, gr := range snap.Routers {
		if slices.ContainsFunc(ops, func(op model.OVNOp) bool { return op.Route.Router == gr.Name }) {
			out = append(out, model.OVNGuard{Router: gr.Name, RouterUUID: gr.UUID, StaticRoutes: slices.Clone(gr.StaticRoutes)})
		}
	}
	slices.SortFunc(out, func(a, b model.OVNGuard) int { return strings.Compare(a.Router, b.Router) })
	return out
}

// diffRules returns the ip rule adds and deletes that turn observed into
// desired, keyed by every field.
func diffRules(desired, observed []model.KernelRule) (adds, deletes []model.KernelOp) {
	same := func(a, b model.KernelRule) bool {
		return a.Priority == b.Priority && a.Src == b.Src && a.Table == b.Table && a.Protocol == b.Protocol
	}
	for _, d := range desired {
		if !slices.ContainsFunc(observed, func(o model.KernelRule) bool { return same(o, d) }) {
			d := d
			adds = append(adds, model.KernelOp{Op: model.OpAdd, PolicyRule: &d})
		}
	}
	for _, o := range observed {
		if !slices.ContainsFunc(desired, func(d model.KernelRule) bool { return same(o, d) }) {
			o := o
			deletes = append(deletes, model.KernelOp{Op: model.OpDelete, PolicyRule: &o})
		}
	}
	return adds, deletes
}

// ruleIndex finds the import rules behind a kernel route or VRF.
type ruleIndex struct {
	cfg     *config.Config
	host    model.Host
	desired []model.KernelRoute
}

// ofRoute is the rule of the desired route with k's key, else every rule
// whose kernel target is k's table or VRF, in config order.
func (x ruleIndex) ofRoute(k model.KernelRoute) []string {
	if k.Rule != "" {
		return []string{k.Rule}
	}
	for _, d := range x.desired {
		if d.Key() == k.Key() && d.Rule != "" {
			return []string{d.Rule}
		}
	}
	var out []string
	for _, r := range x.cfg.Import {
		if x.targets(r, k) {
			out = append(out, r.Name)
		}
	}
	return out
}

// orphan says why kernel route k, of rules (from ofRoute), has no
// configured rule, or "".
func (x ruleIndex) orphan(k model.KernelRoute, rules []string) string {
	for _, name := range rules {
		if why := orphanRule(x.cfg, name); why != "" {
			return why
		}
	}
	if len(rules) > 0 {
		return ""
	}
	if k.VRF != "" {
		return fmt.Sprintf("no configured import rule targets VRF %s (table %d)", k.VRF, k.Table)
	}
	return fmt.Sprintf("no configured import rule targets table %d", k.Table)
}

// targets reports whether rule r's kernel target is k's table (given, or
// that of its VRF on the host) or k's VRF.
func (x ruleIndex) targets(r config.ImportRule, k model.KernelRoute) bool {
	t := r.Targets.Kernel
	if t.VRF != "" && t.VRF == k.VRF {
		return true
	}
	table := uint32(t.Table)
	if t.VRF != "" {
		for _, v := range x.host.VRFs {
			if v.Name == t.VRF {
				table = v.Table
			}
		}
	}
	return table != 0 && table == k.Table
}

// ofVRF is every rule whose kernel target is VRF name.
func (x ruleIndex) ofVRF(name string) []string {
	var out []string
	for _, r := range x.cfg.Import {
		if r.Targets.Kernel.VRF == name {
			out = append(out, r.Name)
		}
	}
	return out
}

// Split divides the plan by the mode of each operation's rule: auto holds
// what the loop applies now (and every advertisement change), manual what
// waits for `ovnbgp apply`. An operation whose rule is no longer configured
// takes the mode every configured rule shares, or manual when they differ
// (auto when there is none). Each part keeps the guards of the routers its
// OVN operations touch.
func (p Plan) Split(cfg *config.Config) (auto, manual Plan) {
	if cfg == nil {
		cfg = &config.Config{}
	}
	x := ruleIndex{cfg: cfg}
	orphan := "auto"
	for i, r := range cfg.Import {
		if i == 0 {
			orphan = r.Mode
		} else if r.Mode != orphan {
			orphan = "manual"
		}
	}
	isManual := func(rules []string) bool {
		if len(rules) == 0 {
			return orphan == "manual"
		}
		for _, name := range rules {
			r, ok := cfg.ImportRule(name)
			if ok && r.Mode == "manual" || !ok && orphan == "manual" {
				return true
			}
		}
		return false
	}
	kernelRules := func(op model.KernelOp) []string {
		switch {
		case op.Route != nil:
			return x.ofRoute(*op.Route)
		case op.VRF != nil:
			return x.ofVRF(op.VRF.Name)
		case op.PolicyRule != nil && op.PolicyRule.Rule != "":
			return []string{op.PolicyRule.Rule}
		}
		return nil
	}
	auto = Plan{Version: p.Version, Node: p.Node, CreatedAt: p.CreatedAt, Advertise: p.Advertise}
	manual = Plan{Version: p.Version, Node: p.Node, CreatedAt: p.CreatedAt}
	pick := func(m bool) *Plan {
		if m {
			return &manual
		}
		return &auto
	}
	for _, op := range p.OVN {
		q := pick(isManual([]string{op.Route.Rule}))
		q.OVN = append(q.OVN, op)
	}
	for _, op := range p.Kernel {
		q := pick(isManual(kernelRules(op)))
		q.Kernel = append(q.Kernel, op)
	}
	for _, h := range p.Held {
		rules := h.Rules
		if len(rules) == 0 && h.Kernel != nil {
			rules = kernelRules(*h.Kernel)
		}
		q := pick(isManual(rules))
		q.Held = append(q.Held, h)
	}
	for _, q := range []*Plan{&auto, &manual} {
		for _, g := range p.Guards {
			if slices.ContainsFunc(q.OVN, func(op model.OVNOp) bool { return op.Route.Router == g.Router }) {
				q.Guards = append(q.Guards, g)
			}
		}
	}
	return auto, manual
}
