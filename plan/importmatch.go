package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// This file is the import decision's matching on path attributes (issue
// 21): an accept entry's communities, large communities, AS path and
// origin AS, and a rule's rejectCommunities. Values compare as
// model.LearnedPath.Communities writes them (bgp prints a standard
// community with model.Community.String, a large one "A:B:C"), so that
// config's parsers stay the only ones.

// ruleMatch is one rule's attribute matches, as strings.
type ruleMatch struct {
	reject  []string
	entries []entryMatch
}

// entryMatch is one accept entry's communities and large communities.
type entryMatch struct {
	comms, large []string
}

func newRuleMatches(cfg *config.Config) []ruleMatch {
	out := make([]ruleMatch, len(cfg.Import))
	for ri := range cfg.Import {
		r := &cfg.Import[ri]
		out[ri].reject = model.Strings(r.RejectCommunities)
		out[ri].entries = make([]entryMatch, len(r.Accept))
		for i, m := range r.Accept {
			out[ri].entries[i] = entryMatch{comms: model.Strings(m.Communities), large: model.Strings(m.LargeCommunities)}
		}
	}
	return out
}

// isLarge reports whether a learned community is a large one ("A:B:C").
func isLarge(c string) bool { return strings.Count(c, ":") == 2 }

// rejected says why rule ri rejects path p by its rejectCommunities, ""
// if it does not.
func (e *importEnv) rejected(ri int, p model.LearnedPath) string {
	rm := &e.match[ri]
	if len(rm.reject) == 0 {
		return ""
	}
	for _, c := range p.Communities {
		if slices.Contains(rm.reject, c) {
			kind := "community"
			if isLarge(c) {
				kind = "large community"
			}
			return fmt.Sprintf("%s %s matches rejectCommunities of rule %s", kind, c, e.cfg.Import[ri].Name)
		}
	}
	return ""
}

// acceptEntry is the index of the first accept entry of rule ri that
// matches path p (prefix, length and attributes). When none does, why
// says what the first entry that matches the prefix lacks ("" if no entry
// matches the prefix).
func (e *importEnv) acceptEntry(ri int, p model.LearnedPath) (entry int, ok bool, why string) {
	r := &e.cfg.Import[ri]
	for i, m := range r.Accept {
		if !m.Matches(p.Prefix) {
			continue
		}
		if !m.HasAttrMatch() {
			return i, true, ""
		}
		w := e.attrsWrong(ri, i, p)
		if w == "" {
			return i, true, ""
		}
		if why == "" {
			why = w
		}
	}
	return 0, false, why
}

// attrsWrong says what path p lacks for accept entry i of rule ri, "" if
// it has everything the entry requires.
func (e *importEnv) attrsWrong(ri, i int, p model.LearnedPath) string {
	r := &e.cfg.Import[ri]
	m, em := &r.Accept[i], &e.match[ri].entries[i]
	head := fmt.Sprintf("rule %s accept[%d] (%s)", r.Name, i, m.Prefix)
	if len(em.comms) > 0 && !slices.ContainsFunc(p.Communities, func(c string) bool { return slices.Contains(em.comms, c) }) {
		return fmt.Sprintf("%s needs one of communities [%s] (route has %s)", head, strings.Join(em.comms, " "), communitiesOf(p, false))
	}
	if len(em.large) > 0 && !slices.ContainsFunc(p.Communities, func(c string) bool { return slices.Contains(em.large, c) }) {
		return fmt.Sprintf("%s needs one of largeCommunities [%s] (route has %s)", head, strings.Join(em.large, " "), communitiesOf(p, true))
	}
	if len(m.ASPathContains) > 0 && !slices.ContainsFunc(p.ASPath, func(a uint32) bool { return slices.Contains(m.ASPathContains, a) }) {
		return fmt.Sprintf("%s needs one of asPathContains %s in the AS path (route has %s)", head, config.ASNList(m.ASPathContains), asPathOf(p))
	}
	if m.OriginAS != 0 {
		if len(p.ASPath) == 0 {
			return fmt.Sprintf("%s needs originAS %d (route has an empty AS path)", head, m.OriginAS)
		}
		if o := p.ASPath[len(p.ASPath)-1]; o != m.OriginAS {
			return fmt.Sprintf("%s needs originAS %d (route's origin AS is %d)", head, m.OriginAS, o)
		}
	}
	return ""
}

// communitiesOf lists p's standard (or large) communities, "none" if it
// has none.
func communitiesOf(p model.LearnedPath, large bool) string {
	var out []string
	for _, c := range p.Communities {
		if isLarge(c) == large {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		if large {
			return "no large community"
		}
		return "no community"
	}
	return strings.Join(out, " ")
}

// asPathOf is p's AS path as a phrase.
func asPathOf(p model.LearnedPath) string {
	if len(p.ASPath) == 0 {
		return "an empty AS path"
	}
	return "AS path " + strings.Trim(config.ASNList(p.ASPath), "[]")
}

// metricOf is the kernel metric of candidate c's accept entry.
func (e *importEnv) metricOf(rule, entry int) uint32 {
	return e.cfg.Import[rule].Accept[entry].Metric
}

// metricNote is what an accepted reason adds for an entry with a metric
// whose rule has an OVN target: OVN static routes have none.
func metricNote(r *config.ImportRule, entry int) string {
	if m := r.Accept[entry].Metric; m != 0 && r.Targets.OVN {
		if r.Targets.Kernel.Table == 0 && r.Targets.Kernel.VRF == "" {
			return fmt.Sprintf("; metric %d is unused: OVN static routes have no metric, and the rule has no kernel target", m)
		}
		return fmt.Sprintf("; metric %d applies to the kernel target only: OVN static routes have no metric", m)
	}
	return ""
}
