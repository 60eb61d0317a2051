package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// ImportInput is everything the import decision reads.
type ImportInput struct {
	Config *config.Config
	// Snapshot gives the networks, gateway routers, NB's protected
	// prefixes and the owned static routes.
	Snapshot model.Snapshot
	// Host gives the links (on-link and local checks), the VRFs and the
	// kernel routes carrying our protocol.
	Host model.Host
	// Learned is every path peers sent (Malformed and Stale set by bgp).
	Learned []model.LearnedPath
	// Stale says, per peer and family, whether its stale paths may be
	// imported (StaleWindows); a peer or family it lacks keeps them.
	Stale map[string]map[config.Family]StaleWindow
}

// ImportResult is the import decision: every path with its verdict, and
// what the accepted ones make the OVN and kernel targets look like.
type ImportResult struct {
	// Paths are the input paths in input order, Accepted, Rule and
	// Reason set.
	Paths []model.LearnedPath `json:"paths"`
	// OVN are the desired owned static routes, sorted by router, prefix,
	// next hop.
	OVN []model.OVNRoute `json:"ovn,omitempty"`
	// Kernel are the desired kernel routes (Protocol from config), sorted
	// by table, prefix.
	Kernel []model.KernelRoute `json:"kernel,omitempty"`
	// VRFs are the VRF devices to create: asked for by createVRF and
	// missing from the host.
	VRFs []model.VRFDevice `json:"vrfs,omitempty"`
	// Rules are the ip rules ovnbgp wants. None today: a VRF target needs
	// none (the VRF's l3mdev rule looks its table up), and which traffic
	// uses a plain table target is the operator's choice (see
	// docs/architecture.md).
	Rules []model.KernelRule `json:"rules,omitempty"`
	// Alarms are the import caps reached.
	Alarms []ImportAlarm `json:"alarms,omitempty"`
	// Problems are rule-level reasons why a target receives nothing, each
	// a sentence naming the rule.
	Problems []string `json:"problems,omitempty"`
	// StaleWhy says, for each stale path kept (accepted), why and until
	// when (StaleWindow.Why), by StaleKey.
	StaleWhy map[string]string `json:"staleWhy,omitempty"`
	// Protected is the full protected set used.
	Protected []model.ProtectedPrefix `json:"protected,omitempty"`
}

// ImportAlarm says that a rule's import cap holds back prefixes of a peer.
type ImportAlarm struct {
	Rule string `json:"rule"`
	Peer string `json:"peer"`
	// Max is the rule's maxRoutes, Wanted the prefixes the peer offered
	// that passed every other check.
	Max    int `json:"max"`
	Wanted int `json:"wanted"`
}

// String is the alarm as a sentence (PeerStatus.ImportAlarm, logs).
func (a ImportAlarm) String() string {
	return fmt.Sprintf("import cap: rule %s accepts at most %d routes from peer %s (%d offered)", a.Rule, a.Max, a.Peer, a.Wanted)
}

// Import decides, for every learned path, whether an import rule accepts it
// and why (the order of the checks is in docs/config.md, "Import
// decision"), and computes the desired OVN static routes, kernel routes and
// VRFs. It is pure: the same input gives the same result. Paths are keyed
// by (peer, prefix), as a peer sends them: of two paths with the same key,
// the later one is decided. It is NewImportTable(in).Result().
func Import(in ImportInput) ImportResult {
	return NewImportTable(in).Result()
}

// malformedReason is the reason of a path bgp marked Malformed, and its
// cause: "malformed: WHY", or just WHY when it names a loop (our ASN in the
// AS path, our router ID as ORIGINATOR_ID), which is not a malformed path
// but a normal sight on a fabric where nodes share an AS.
func malformedReason(why string) (string, RejectCause) {
	if isLoop(why) {
		return why + "; such a path is never imported", RejectLoop
	}
	return "malformed: " + why + "; such a path is never imported", RejectMalformed
}

// isLoop reports whether bgp's Malformed text names a routing loop.
func isLoop(why string) bool { return strings.HasPrefix(why, model.RoutingLoop) }

// RejectCause is why a learned path is not imported, in a word: the
// class of its reason (model.LearnedPath.Reason says it in full). Metrics
// count rejected paths by it.
type RejectCause string

// The causes, in the order the checks run (docs/config.md, "Import
// decision").
const (
	RejectMalformed    RejectCause = "malformed"       // the path itself is invalid
	RejectLoop         RejectCause = "loop"            // our ASN in the AS path, or our router ID as ORIGINATOR_ID
	RejectNoRule       RejectCause = "noRule"          // no import rule lists the peer (RFC 8212)
	RejectNoMatch      RejectCause = "noMatch"         // no accept entry matches the prefix or its length
	RejectDefaultRoute RejectCause = "defaultRoute"    // 0/0 without allowDefaultRoute
	RejectProtected    RejectCause = "protected"       // the prefix is, or is inside, a protected prefix
	RejectNextHop      RejectCause = "nextHop"         // the next hop is not acceptable or not reachable
	RejectImportCap    RejectCause = "importCap"       // held back by the rule's maxRoutes
	RejectStale        RejectCause = "stale"           // kept stale by gobgp, past what graceful restart allows (StaleWindows)
	RejectCommunity    RejectCause = "rejectCommunity" // the path carries one of the rule's rejectCommunities (issue 21)
	RejectAttributes   RejectCause = "attributes"      // an accept entry matches the prefix, none the path's communities or AS path
)

// candidate is a path that a rule accepts, by one of its accept entries.
type candidate struct {
	path, rule, entry int
}

// acceptedReason says which rules accepted a path, by which entries, and,
// after each, where (from where) the path is not installed and why; the
// reason of a path accepted by one rule and installed in all its targets
// is cached in reasons.
func acceptedReason(cfg *config.Config, acc []candidate, reasons map[[2]int]string, where func(rule int) string) string {
	if len(acc) == 1 {
		if w := where(acc[0].rule); w != "" {
			r := &cfg.Import[acc[0].rule]
			return fmt.Sprintf("accepted by rule %s (%s)%s%s", r.Name, r.Accept[acc[0].entry], w, metricNote(r, acc[0].entry))
		}
		k := [2]int{acc[0].rule, acc[0].entry}
		if r, ok := reasons[k]; ok {
			return r
		}
		r := &cfg.Import[acc[0].rule]
		reasons[k] = fmt.Sprintf("accepted by rule %s (%s)%s", r.Name, r.Accept[acc[0].entry], metricNote(r, acc[0].entry))
		return reasons[k]
	}
	by := make([]string, len(acc))
	for i, c := range acc {
		r := &cfg.Import[c.rule]
		by[i] = fmt.Sprintf("rule %s (%s)%s%s", r.Name, r.Accept[c.entry], where(c.rule), metricNote(r, c.entry))
	}
	return "accepted by " + strings.Join(by, " and ")
}

// importEnv is what the checks need, derived once per Import.
type importEnv struct {
	cfg  *config.Config
	snap model.Snapshot
	host model.Host
	// prot is the protected set; nhProt the part a next hop may not be in
	// (without host and peer addresses: a peer's address is the usual
	// next hop, a local one has its own reason).
	prot, nhProt []model.ProtectedPrefix
	// protIdx and nhIdx index them.
	protIdx, nhIdx protIndex
	local          map[netip.Addr]string // host address -> link
	// localOn are the host's IPv6 link-local addresses by (address
	// without zone, link): a link-local next hop is local only on its own
	// link (issue 20).
	localOn map[linkAddr]bool
	// peers are the configured peers by name.
	peers  map[string]*config.Peer
	grAddr map[netip.Addr]*model.GatewayRouter // a GR's own external address -> GR
	// peerLink is each configured peer's link, or why it has none.
	peerLink   map[string]*model.Link
	peerNoLink map[string]string
	// firstAS is, for each eBGP peer with enforceFirstAS, its ASN: the
	// first AS of its paths must be that (RFC 4271 6.3).
	firstAS map[string]uint32
	routers []*model.GatewayRouter // per rule: its OVN target, nil if none
	tables  []uint32               // per rule: its kernel table, 0 if none
	vrfs    []string               // per rule: its VRF, "" if none
	// ovnWhy and kernelWhy are, per rule, why its configured OVN or
	// kernel target receives nothing ("" if usable or not configured).
	ovnWhy, kernelWhy []string
	problems          []string
	createVRFs        []model.VRFDevice
	// foreign are the kernel keys routes not ours hold (Host.Foreign);
	// foreignOVN the static routes not ours on the gateway routers.
	foreign    map[model.KernelRouteKey]bool
	foreignOVN map[model.OVNRouteKey]bool
	// match are, per rule, its attribute matches (issue 21).
	match []ruleMatch
}

// Installed are the routes installed now (owned OVN rows, routes in
// ovnbgp's kernel tables), by (rule or table, prefix, next hop): where a
// cap holds prefixes back, the prefixes that join it in one Update are
// kept installed first (TableChange.Installed).
type Installed struct {
	at map[installedKey]bool
}

// NewInstalled indexes the owned OVN rows and kernel routes installed now.
func NewInstalled(owned []model.OVNRoute, kernel []model.KernelRoute) *Installed {
	n := len(owned)
	for _, k := range kernel {
		n += len(k.NextHops)
	}
	in := &Installed{at: make(map[installedKey]bool, n)}
	for _, o := range owned {
		in.at[installedKey{rule: o.Rule, prefix: o.Prefix, nextHop: o.NextHop}] = true
	}
	for _, k := range kernel {
		for _, nh := range k.NextHops {
			in.at[installedKey{table: k.Table, prefix: k.Prefix, nextHop: nh.Addr}] = true
		}
	}
	return in
}

type installedKey struct {
	rule    string
	table   uint32
	prefix  netip.Prefix
	nextHop netip.Addr
}

func newImportEnv(cfg *config.Config, snap model.Snapshot, host model.Host, prot []model.ProtectedPrefix) *importEnv {
	e := &importEnv{cfg: cfg, snap: snap, host: host, prot: prot,
		local: map[netip.Addr]string{}, localOn: map[linkAddr]bool{}, peers: map[string]*config.Peer{}, grAddr: map[netip.Addr]*model.GatewayRouter{}, peerLink: map[string]*model.Link{}, peerNoLink: map[string]string{},
		foreign: make(map[model.KernelRouteKey]bool, len(host.Foreign)), match: newRuleMatches(cfg)}
	for _, k := range host.Foreign {
		e.foreign[k] = true
	}
	e.foreignOVN = map[model.OVNRouteKey]bool{}
	for _, gr := range snap.Routers {
		for _, k := range gr.ForeignRoutes {
			e.foreignOVN[k] = true
		}
	}
	e.setProtected(prot)
	for li := range host.Links {
		for _, a := range host.Links[li].Addrs {
			e.local[a.Addr()] = host.Links[li].Name
			if a.Addr().Is6() && a.Addr().IsLinkLocalUnicast() {
				e.localOn[linkAddr{a.Addr(), host.Links[li].Name}] = true
			}
		}
	}
	for gi := range snap.Routers {
		for _, n := range snap.Routers[gi].ExternalNetworks {
			if _, ok := e.grAddr[n.Addr()]; !ok {
				e.grAddr[n.Addr()] = &snap.Routers[gi]
			}
		}
	}
	e.firstAS = map[string]uint32{}
	for pi, p := range cfg.BGP.Peers {
		e.peers[p.Name] = &cfg.BGP.Peers[pi]
		e.findPeerLink(p)
		if p.EnforceFirstAS && p.ASN != cfg.BGP.ASN {
			e.firstAS[p.Name] = p.ASN
		}
	}
	created := map[string]bool{}
	for ri := range cfg.Import {
		r := &cfg.Import[ri]
		n := len(e.problems)
		gr := e.router(r)
		e.routers = append(e.routers, gr)
		e.ovnWhy = append(e.ovnWhy, e.newProblem(n))
		n = len(e.problems)
		t, vrf := e.kernelTable(r, created)
		e.tables = append(e.tables, t)
		e.vrfs = append(e.vrfs, vrf)
		e.kernelWhy = append(e.kernelWhy, e.newProblem(n))
	}
	return e
}

// setProtected makes prot the protected set the checks use.
func (e *importEnv) setProtected(prot []model.ProtectedPrefix) {
	e.prot, e.nhProt = prot, nextHopProtected(prot)
	e.protIdx, e.nhIdx = newProtIndex(e.prot), newProtIndex(e.nhProt)
}

// findPeerLink finds the link through which peer p's next hops must be
// on-link: its configured interface, else the link with the longest
// connected prefix holding its address.
func (e *importEnv) findPeerLink(p config.Peer) {
	if dev := p.Link(); dev != "" {
		for li := range e.host.Links {
			if l := &e.host.Links[li]; l.Name == dev {
				e.peerLink[p.Name] = l
				return
			}
		}
		e.peerNoLink[p.Name] = fmt.Sprintf("peer %s's interface %s is not a link of this host", p.Name, dev)
		return
	}
	best := -1
	for li := range e.host.Links {
		for _, a := range e.host.Links[li].Addrs {
			if a.Masked().Contains(p.Address) && a.Bits() > best {
				best = a.Bits()
				e.peerLink[p.Name] = &e.host.Links[li]
			}
		}
	}
	if best < 0 {
		e.peerNoLink[p.Name] = fmt.Sprintf("peer %s's address %s is inside no connected prefix of a host link (a multihop peer needs bgp.peers[].interface naming the link its next hops are on)", p.Name, p.Address)
	}
}

// linkAddr is an address (without zone) on a link.
type linkAddr struct {
	addr netip.Addr
	link string
}

// router is rule r's OVN target, or nil with a problem recorded.
func (e *importEnv) router(r *config.ImportRule) *model.GatewayRouter {
	if !r.Targets.OVN {
		return nil
	}
	for i := range e.snap.Routers {
		gr := &e.snap.Routers[i]
		if gr.Network != r.Network {
			continue
		}
		switch {
		case gr.ForeignImport != "":
			e.problem("rule %s: refusing to import into %s, which OVN-Kubernetes' own route import manages: %s", r.Name, gr.Name, gr.ForeignImport)
		case gr.ExternalPort == "":
			e.problem("rule %s: gateway router %s of network %s has no external port: nothing is imported into OVN", r.Name, gr.Name, r.Network)
		default:
			return gr
		}
		return nil
	}
	e.problem("rule %s: network %s has no gateway router on node %s in NB: nothing is imported into OVN", r.Name, r.Network, e.snap.Node)
	return nil
}

// kernelTable is rule r's kernel table and VRF, or 0 with a problem
// recorded; a VRF to create is added to createVRFs once.
func (e *importEnv) kernelTable(r *config.ImportRule, created map[string]bool) (uint32, string) {
	k := r.Targets.Kernel
	if k.VRF == "" {
		return uint32(k.Table), ""
	}
	for _, v := range e.host.VRFs {
		if v.Name != k.VRF {
			continue
		}
		if k.Table != 0 && uint32(k.Table) != v.Table {
			e.problem("rule %s: VRF %s uses table %d, not targets.kernel.table %d: set table: %d, or remove it", r.Name, v.Name, v.Table, k.Table, v.Table)
			return 0, ""
		}
		return v.Table, v.Name
	}
	if !k.CreateVRF {
		e.problem("rule %s: VRF %s does not exist on this host: create it, or set targets.kernel.createVRF: true with a table", r.Name, k.VRF)
		return 0, ""
	}
	if !created[k.VRF] {
		created[k.VRF] = true
		e.createVRFs = append(e.createVRFs, model.VRFDevice{Name: k.VRF, Table: uint32(k.Table)})
	}
	return uint32(k.Table), k.VRF
}

// newProblem is the problem recorded since there were n, or "".
func (e *importEnv) newProblem(n int) string {
	if len(e.problems) > n {
		return e.problems[len(e.problems)-1]
	}
	return ""
}

func (e *importEnv) problem(format string, args ...any) {
	e.problems = append(e.problems, fmt.Sprintf(format, args...))
}

// firstASWrong says why path p's first AS is not its eBGP peer's, "" if
// it is or the peer is not checked: RFC 4271 6.3 calls such a path a
// Malformed AS_PATH; like FRR's enforce-first-as, it is refused, the
// session kept. An empty AS path is bgp's verdict (Malformed).
func (e *importEnv) firstASWrong(p model.LearnedPath) string {
	asn, ok := e.firstAS[p.Peer]
	if !ok || len(p.ASPath) == 0 || p.ASPath[0] == asn {
		return ""
	}
	return fmt.Sprintf("malformed: first AS %d of the AS path is not peer %s's AS %d (RFC 4271 6.3); such a path is never imported "+
		"(a route server that leaves its own AS out needs bgp.peers[].enforceFirstAS: false)", p.ASPath[0], p.Peer, asn)
}

// noMatch is the reason for a path no accept entry of its peer's rules
// matches.
func (e *importEnv) noMatch(p model.LearnedPath) string {
	var rules []string
	for _, r := range e.cfg.Import {
		if !slices.Contains(r.Peers, p.Peer) {
			continue
		}
		var entries []string
		for _, m := range r.Accept {
			entries = append(entries, m.String())
		}
		rules = append(rules, fmt.Sprintf("rule %s accepts %s", r.Name, strings.Join(entries, ", ")))
	}
	return fmt.Sprintf("no accept entry matches %s from peer %s (%s)", p.Prefix, p.Peer, strings.Join(rules, "; "))
}

// check runs every check after the accept match, for path p and rule ri,
// and returns the first failing one's reason and its cause, or "".
func (e *importEnv) check(ri int, p model.LearnedPath) (string, RejectCause) {
	r := &e.cfg.Import[ri]
	if p.Prefix.Bits() == 0 && !r.AllowDefaultRoute {
		return fmt.Sprintf("%s is the default route and rule %s does not set allowDefaultRoute", p.Prefix, r.Name), RejectDefaultRoute
	}
	if pp, ok := e.protIdx.covering(p.Prefix); ok {
		if pp.Prefix == p.Prefix {
			return fmt.Sprintf("%s is protected: %s (rule %s)", p.Prefix, pp.Why, r.Name), RejectProtected
		}
		return fmt.Sprintf("%s is inside protected %s: %s (rule %s)", p.Prefix, pp.Prefix, pp.Why, r.Name), RejectProtected
	}
	if m, ok := martianCovering(p.Prefix); ok {
		if m.Prefix == p.Prefix {
			return fmt.Sprintf("%s is protected: %s (rule %s)", p.Prefix, m.Why, r.Name), RejectProtected
		}
		return fmt.Sprintf("%s is inside protected %s: %s (rule %s)", p.Prefix, m.Prefix, m.Why, r.Name), RejectProtected
	}
	if reason := e.nextHop(p); reason != "" {
		return reason + fmt.Sprintf(" (rule %s)", r.Name), RejectNextHop
	}
	if gr := e.routers[ri]; gr != nil && e.tables[ri] == 0 {
		// with a kernel target, the path goes there only (see where)
		if why := e.ovnSkips(gr, p); why != "" {
			if e.mixedSkipped(p) {
				why += "; only a kernel target installs it"
			}
			return why + fmt.Sprintf(" (rule %s, network %s)", r.Name, r.Network), RejectNextHop
		}
	}
	return "", ""
}

// inExternal reports whether a is inside a network of gr's external port.
func inExternal(gr *model.GatewayRouter, a netip.Addr) bool {
	return slices.ContainsFunc(gr.ExternalNetworks, func(n netip.Prefix) bool { return n.Masked().Contains(a) })
}

// mixedFamily reports whether path p is an IPv4 prefix with an IPv6 next
// hop (RFC 8950).
func mixedFamily(p model.LearnedPath) bool { return p.Prefix.Addr().Is4() && p.NextHop.Is6() }

// mixedSkipped reports whether path p is an IPv4 prefix with an IPv6 next
// hop that NB's northd would drop (model.NorthdVersion.MixedFamilyRoutes).
func (e *importEnv) mixedSkipped(p model.LearnedPath) bool {
	return mixedFamily(p) && !e.snap.Northd.MixedFamilyRoutes()
}

// ovnTakes reports whether gateway router gr takes path p as a static
// route (ovnSkips says why not).
func (e *importEnv) ovnTakes(gr *model.GatewayRouter, p model.LearnedPath) bool {
	return !e.mixedSkipped(p) && p.NextHop.Zone() == "" && inExternal(gr, p.NextHop)
}

// ovnSkips says why gateway router gr does not take path p as a static
// route, "" if it does. northd before OVN 25.03 (commit 559924291,
// "northd: Handle routing for other address families") drops a static
// route whose prefix and next hop families differ with one log line, and
// OpenShift 4.16-4.19 ship OVN 24.03 and 24.09 (issue 20): with such a
// northd, or one whose version NB does not give, such a path goes to the
// kernel target only; from 25.03 on, to OVN too. A link-local next hop is
// never written to NB (a zone is not valid there, and without one it
// names no port).
func (e *importEnv) ovnSkips(gr *model.GatewayRouter, p model.LearnedPath) string {
	switch {
	case e.mixedSkipped(p):
		return fmt.Sprintf(`IPv4 prefix with IPv6 next hop %s: %s ignores a static route whose families differ ("Address family doesn't match")`,
			p.NextHop, northdBefore(e.snap.Northd))
	case p.NextHop.Zone() != "":
		return fmt.Sprintf("next hop %s of %s is link-local: ovnbgp writes no link-local next hop into NB", p.NextHop, p.Prefix)
	case !inExternal(gr, p.NextHop):
		return fmt.Sprintf("next hop %s of %s is outside the external networks %s of gateway router %s",
			p.NextHop, p.Prefix, prefixList(gr.ExternalNetworks), gr.Name)
	}
	return ""
}

// northdBefore says that northd v is, or is taken as, before OVN 25.03.
func northdBefore(v model.NorthdVersion) string {
	switch {
	case v.Known():
		return fmt.Sprintf("northd %s is before OVN 25.03, and", v)
	case v.Raw == "":
		return "northd version unknown (no NB_Global options:northd_internal_version), taken as before OVN 25.03, which"
	}
	return fmt.Sprintf("northd version unknown (NB_Global options:northd_internal_version %q), taken as before OVN 25.03, which", v.Raw)
}

// where says, for path p accepted by rule ri, where it is not installed
// and why, and where it is: "" when it goes to every target the rule
// configures.
func (e *importEnv) where(ri int, p model.LearnedPath) string {
	r := &e.cfg.Import[ri]
	ovn, kernel := r.Targets.OVN, r.Targets.Kernel.Table != 0 || r.Targets.Kernel.VRF != ""
	gr := e.routers[ri]
	ovnOK := !ovn || gr != nil && e.ovnTakes(gr, p)
	kernelOK := !kernel || e.tables[ri] != 0
	if ovnOK && kernelOK {
		// The usual answer, made without a string: it is asked for
		// every accepted path each time its prefix is decided.
		return ""
	}
	var in, not []string
	if ovn {
		switch {
		case gr == nil:
			not = append(not, "not in OVN: "+e.ovnWhy[ri])
		case !e.ovnTakes(gr, p):
			not = append(not, fmt.Sprintf("not in OVN: %s (network %s)", e.ovnSkips(gr, p), r.Network))
		default:
			in = append(in, fmt.Sprintf("OVN (%s)", gr.Name))
		}
	}
	if kernel {
		switch {
		case e.tables[ri] == 0:
			not = append(not, "not in the kernel: "+e.kernelWhy[ri])
		case e.vrfs[ri] != "":
			in = append(in, fmt.Sprintf("VRF %s (table %d)", e.vrfs[ri], e.tables[ri]))
		default:
			in = append(in, fmt.Sprintf("table %d", e.tables[ri]))
		}
	}
	switch {
	case len(not) == 0:
		return ""
	case len(in) == 0:
		return ", but installed nowhere: " + strings.Join(not, "; ")
	}
	return ", installed in " + strings.Join(in, " and ") + " only: " + strings.Join(not, "; ")
}

// nextHop checks path p's next hop (safety rule 3); "" if it is fine.
func (e *importEnv) nextHop(p model.LearnedPath) string {
	nh := p.NextHop
	switch {
	case !nh.IsValid():
		return fmt.Sprintf("the next hop of %s is missing or invalid", p.Prefix)
	case nh.Is4In6():
		return fmt.Sprintf("next hop %s of %s is an IPv4-mapped IPv6 address", nh, p.Prefix)
	case nh.Is4() && !p.Prefix.Addr().Is4():
		return fmt.Sprintf("next hop %s is %s but the prefix %s is %s", nh, familyName(nh), p.Prefix, familyName(p.Prefix.Addr()))
	case nh.Is6() && p.Prefix.Addr().Is4():
		// RFC 8950 (issue 20): only a session over IPv6 carries an
		// IPv4 prefix with an IPv6 next hop.
		if peer := e.peers[p.Peer]; peer == nil || !peer.TransportIs6() {
			return fmt.Sprintf("next hop %s is IPv6 but the prefix %s is IPv4, and peer %s's session is over IPv4: an IPv6 next hop for an IPv4 prefix (RFC 8950) comes only over an IPv6 session", nh, p.Prefix, p.Peer)
		}
	}
	if nh.Is6() && nh.IsLinkLocalUnicast() {
		if why := e.linkLocalWrong(p); why != "" {
			return why
		}
	} else if nh.Zone() != "" {
		return fmt.Sprintf("next hop %s of %s carries a zone but is not link-local", nh, p.Prefix)
	} else if c := addrClass(nh); c != "" {
		return fmt.Sprintf("next hop %s of %s is %s", nh, p.Prefix, c)
	}
	if link, ok := e.local[nh]; ok {
		return fmt.Sprintf("next hop %s of %s is local (an address of host link %s)", nh, p.Prefix, link)
	}
	if nh.Zone() != "" && e.localOn[linkAddr{nh.WithZone(""), nh.Zone()}] {
		return fmt.Sprintf("next hop %s of %s is local (an address of host link %s)", nh, p.Prefix, nh.Zone())
	}
	if gr, ok := e.grAddr[nh]; ok {
		return fmt.Sprintf("next hop %s of %s is the own address of gateway router %s on its external port %s", nh, p.Prefix, gr.Name, gr.ExternalPort)
	}
	if pp, ok := e.nhIdx.covering(hostPrefix(nh)); ok {
		return fmt.Sprintf("next hop %s of %s is inside protected %s: %s", nh, p.Prefix, pp.Prefix, pp.Why)
	}
	link := e.peerLink[p.Peer]
	if link == nil {
		why := e.peerNoLink[p.Peer]
		if why == "" {
			why = fmt.Sprintf("peer %s is not configured", p.Peer)
		}
		return fmt.Sprintf("next hop %s of %s cannot be checked on-link: %s", nh, p.Prefix, why)
	}
	// A link-local next hop is on-link by its zone, which linkLocalWrong
	// checked is the peer's link: every IPv6 link has fe80::/64.
	if nh.Zone() == "" && !onLink(link, nh) {
		return fmt.Sprintf("next hop %s of %s is not on-link through peer %s's link %s (%s)", nh, p.Prefix, p.Peer, link.Name, prefixList(link.Addrs))
	}
	if nh.Is4() {
		for _, c := range link.Addrs {
			if !c.Addr().Is4() || c.Bits() >= 31 || !c.Masked().Contains(nh) {
				continue
			}
			switch nh {
			case c.Masked().Addr():
				return fmt.Sprintf("next hop %s of %s is the network address of on-link prefix %s (link %s)", nh, p.Prefix, c.Masked(), link.Name)
			case broadcast(c):
				return fmt.Sprintf("next hop %s of %s is the broadcast address of on-link prefix %s (link %s)", nh, p.Prefix, c.Masked(), link.Name)
			}
		}
	}
	return ""
}

// linkLocalWrong says why path p's IPv6 link-local next hop is refused, ""
// if it is not (safety rule 3, issue 20 contract item 6): it must come from
// a peer on that link (an interface, not multihop, and a numbered peer's
// address on that link) and carry the peer's link as its zone. Whether it
// is one of the node's own addresses is nextHop's check.
func (e *importEnv) linkLocalWrong(p model.LearnedPath) string {
	nh := p.NextHop
	head := fmt.Sprintf("next hop %s of %s is a link-local address", nh, p.Prefix)
	peer := e.peers[p.Peer]
	if peer == nil {
		return head + fmt.Sprintf(", and peer %s is not configured", p.Peer)
	}
	dev := peer.Link()
	switch {
	case dev == "":
		return head + fmt.Sprintf(", and peer %s has no interface: a link-local next hop is accepted only from a peer on that link (bgp.peers[].interface)", p.Peer)
	case peer.EBGPMultihop > 0:
		return head + fmt.Sprintf(", and peer %s is multihop (ebgpMultihop %d): a link-local next hop is accepted only from a peer on that link", p.Peer, peer.EBGPMultihop)
	case peer.Address.IsValid() && !peer.Address.IsLinkLocalUnicast():
		if link := e.peerLink[p.Peer]; link != nil && !onLink(link, peer.Address) {
			return head + fmt.Sprintf(", and peer %s's address %s is not on its interface %s: a link-local next hop is accepted only from a peer on that link", p.Peer, peer.Address, dev)
		}
	}
	switch nh.Zone() {
	case "":
		return head + " without a zone: the link it is on is unknown"
	case dev:
		return ""
	}
	return head + fmt.Sprintf(" on %s, not on peer %s's link %s", nh.Zone(), p.Peer, dev)
}

// addrClass names the class of address that is never a next hop
// (unspecified, loopback, multicast, broadcast, link-local), "" for any
// other.
func addrClass(nh netip.Addr) string {
	switch {
	case nh.IsUnspecified():
		return "the unspecified address"
	case nh.IsLoopback():
		return "a loopback address"
	case nh.IsMulticast():
		return "a multicast address"
	case nh == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	case nh.IsLinkLocalUnicast():
		return "a link-local address"
	}
	return ""
}

// broadcast is the last address of IPv4 prefix c.
func broadcast(c netip.Prefix) netip.Addr {
	a := c.Masked().Addr().As4()
	host := uint32(1)<<(32-c.Bits()) - 1
	for i := range 4 {
		a[3-i] |= byte(host >> (8 * i))
	}
	return netip.AddrFrom4(a)
}

// onLink reports whether a is inside a connected prefix of l.
func onLink(l *model.Link, a netip.Addr) bool {
	return slices.ContainsFunc(l.Addrs, func(c netip.Prefix) bool { return c.Masked().Contains(a) })
}

func prefixList(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// installed reports whether rule ri has prefix p installed through next
// hop nh (a peer's path): an owned OVN row of the rule to nh, or a route in
// the rule's kernel table with nh among its next hops. Caps count per
// (rule, peer): a prefix installed through another peer is not this
// peer's.
func (e *importEnv) installed(in *Installed, ri int, p netip.Prefix, nh netip.Addr) bool {
	if in == nil {
		return false
	}
	if in.at[installedKey{rule: e.cfg.Import[ri].Name, prefix: p, nextHop: nh}] {
		return true
	}
	return e.tables[ri] != 0 && in.at[installedKey{table: e.tables[ri], prefix: p, nextHop: nh.WithZone("")}]
}

// targets turns the accepted candidates of one prefix's paths into OVN
// rows (one per next hop) and kernel routes (one multipath route per
// table), and names the keys that routes not ovnbgp's hold (foreignOVN,
// foreignK). A target (router or table) takes a prefix from the first rule,
// in config order, that accepts it. The rows and routes are appended to
// ovn and kernel (a caller collecting many prefixes' makes no copies).
func (e *importEnv) targets(paths []model.LearnedPath, cands []candidate, ovn []model.OVNRoute, kernel []model.KernelRoute) ([]model.OVNRoute, []model.KernelRoute, []model.OVNRouteKey, []model.KernelRouteKey) {
	var foreignOVN []model.OVNRouteKey
	var foreignK []model.KernelRouteKey
	o0, k0 := len(ovn), len(kernel) // this prefix's are ovn[o0:], kernel[k0:]
	if len(cands) > 1 {
		slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.rule, b.rule) })
	}
	// A prefix has few claims (one per router and per table): slices.
	type claim[K comparable] struct {
		key  K
		rule int
	}
	var ovnOwner []claim[string]  // router -> rule
	var kernOwner []claim[uint32] // table -> rule; kernel[k0+i] is kernOwner[i]'s route
	// bws[i][j] is the bandwidth of the path of kernel[k0+i]'s next hop j
	// (weights.go).
	var bws [][]float64
	// A table takes the prefix from the candidates with the lowest
	// metric (issue 21: entries and rules rank routes), then the first
	// rule among them.
	type tableBest struct {
		table  uint32
		rule   int
		metric uint32
	}
	var best []tableBest
	for _, c := range cands {
		t := e.tables[c.rule]
		if t == 0 {
			continue
		}
		m := e.metricOf(c.rule, c.entry)
		i := slices.IndexFunc(best, func(b tableBest) bool {
			return b.table == t
		})
		switch {
		case i < 0:
			best = append(best, tableBest{t, c.rule, m})
		case m < best[i].metric:
			best[i].rule, best[i].metric = c.rule, m
		}
	}
	for _, c := range cands {
		p, r := paths[c.path], &e.cfg.Import[c.rule]
		if gr := e.routers[c.rule]; gr != nil && e.ovnTakes(gr, p) {
			i := slices.IndexFunc(ovnOwner, func(o claim[string]) bool { return o.key == gr.Name })
			if i < 0 {
				ovnOwner = append(ovnOwner, claim[string]{gr.Name, c.rule})
			}
			if i < 0 || ovnOwner[i].rule == c.rule {
				row := model.OVNRoute{Router: gr.Name, Prefix: p.Prefix, NextHop: p.NextHop,
					OutputPort: gr.ExternalPort, Rule: r.Name, Network: r.Network}
				if e.foreignOVN[row.Key()] {
					// The same route is there already, not ours: a
					// duplicate row would add nothing but confusion.
					if !slices.Contains(foreignOVN, row.Key()) {
						foreignOVN = append(foreignOVN, row.Key())
					}
				} else if !slices.ContainsFunc(ovn[o0:], func(o model.OVNRoute) bool { return o.Key() == row.Key() }) {
					ovn = append(ovn, row)
				}
			}
		}
		if t := e.tables[c.rule]; t != 0 {
			k := model.KernelRouteKey{Table: t, Prefix: p.Prefix}
			if e.foreign[k] {
				if !slices.Contains(foreignK, k) {
					foreignK = append(foreignK, k)
				}
				continue
			}
			b := best[slices.IndexFunc(best, func(b tableBest) bool {
				return b.table == t
			})]
			if b.rule != c.rule || b.metric != e.metricOf(c.rule, c.entry) {
				continue
			}
			i := slices.IndexFunc(kernOwner, func(o claim[uint32]) bool { return o.key == t })
			if i < 0 {
				kernOwner = append(kernOwner, claim[uint32]{t, c.rule})
				kernel = append(kernel, model.KernelRoute{Table: t, VRF: e.vrfs[c.rule], Prefix: p.Prefix,
					Protocol: e.cfg.Kernel.RouteProtocol, Metric: b.metric, Rule: r.Name})
				i = len(kernel) - 1 - k0
				bws = append(bws, nil)
			}
			// A link-local next hop's zone is its device, which nextHop
			// checked is the peer's link; the kernel route's address
			// carries no zone (contract item 4, issue 20).
			nh := model.NextHop{Addr: p.NextHop.WithZone(""), Dev: e.peerLink[p.Peer].Name}
			if r := &kernel[k0+i]; !slices.Contains(r.NextHops, nh) {
				r.NextHops = append(r.NextHops, nh)
				bws[i] = append(bws[i], pathBandwidth(p))
			}
		}
	}
	for i := range kernel[k0:] {
		if slices.ContainsFunc(bws[i], func(b float64) bool { return b != noBandwidth }) {
			bandwidthWeights(kernel[k0+i].NextHops, bws[i])
		}
		slices.SortFunc(kernel[k0+i].NextHops, compareNextHop)
	}
	if len(ovn)-o0 > 1 {
		slices.SortFunc(ovn[o0:], compareOVN)
	}
	if len(kernel)-k0 > 1 {
		slices.SortFunc(kernel[k0:], compareKernel)
	}
	return ovn, kernel, foreignOVN, foreignK
}

// PeerImport is one peer's import state, for model.PeerStatus.Imported and
// ImportAlarm.
type PeerImport struct {
	// Imported counts the peer's accepted paths.
	Imported int `json:"imported"`
	// Alarm is every cap the peer reached, "; "-joined, "" if none.
	Alarm string `json:"alarm,omitempty"`
}

// PeerImports returns the import state of every peer that sent a path or
// reached a cap.
func (r ImportResult) PeerImports() map[string]PeerImport {
	out := map[string]PeerImport{}
	for _, p := range r.Paths {
		pi := out[p.Peer]
		if p.Accepted {
			pi.Imported++
		}
		out[p.Peer] = pi
	}
	for _, a := range r.Alarms {
		pi := out[a.Peer]
		if pi.Alarm != "" {
			pi.Alarm += "; "
		}
		pi.Alarm += a.String()
		out[a.Peer] = pi
	}
	return out
}

// StaleKey names a peer's path in ImportResult.StaleWhy: "peer prefix".
func StaleKey(peer string, prefix netip.Prefix) string { return peer + " " + prefix.String() }
