package plan

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ovnbgp/ovnbgp/model"
)

// String is the counts in one line, e.g. "OVN: 1 add, 0 replace, 1 delete;
// kernel: ...; held: 2".
func (c Counts) String() string {
	return fmt.Sprintf("OVN: %d add, %d replace, %d delete; kernel: %d add, %d replace, %d delete, %d VRF create, %d ip rule add, %d ip rule delete; advertise: %d announce, %d change, %d withdraw; held: %d",
		c.OVNAdd, c.OVNReplace, c.OVNDelete, c.KernelAdd, c.KernelReplace, c.KernelDelete, c.VRFAdd, c.RuleAdd, c.RuleDelete,
		c.Announce, c.Change, c.Withdraw, c.Held)
}

// Table renders the plan for people: a header with the counts, then one
// line per operation (OVN, kernel, advertise, held) in the order they are
// applied. `-o json` prints the Plan itself.
func (p Plan) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for node %s at %s (format %d)\n", p.Node, p.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), p.Version)
	fmt.Fprintf(&b, "%s\n", p.Counts())
	if p.Empty() && len(p.Held) == 0 {
		b.WriteString("no changes\n")
		return b.String()
	}
	w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "TARGET\tOP\tWHERE\tPREFIX\tVIA\tRULE")
	for _, op := range p.OVN {
		fmt.Fprintln(w, ovnLine("ovn", op))
	}
	for _, op := range p.Kernel {
		fmt.Fprintln(w, kernelLine("kernel", op))
	}
	for _, a := range p.Advertise.Announce {
		fmt.Fprintf(w, "advertise\tannounce\tpeer %s\t%s\t\t%s\n", a.Peer, a.Prefix, a.Rule)
	}
	for _, a := range p.Advertise.Change {
		fmt.Fprintf(w, "advertise\tchange\tpeer %s\t%s\t\t%s\n", a.Peer, a.Prefix, a.Rule)
	}
	for _, a := range p.Advertise.Withdraw {
		fmt.Fprintf(w, "advertise\twithdraw\tpeer %s\t%s\t\t%s\n", a.Peer, a.Prefix, a.Rule)
	}
	for _, h := range p.Held {
		switch {
		case h.OVN != nil:
			fmt.Fprintln(w, ovnLine("held ovn", *h.OVN))
		case h.Kernel != nil:
			fmt.Fprintln(w, kernelLine("held kernel", *h.Kernel))
		}
	}
	w.Flush()
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	b.Reset()
	b.WriteString(strings.Join(lines, "\n"))
	for _, h := range p.Held {
		var what string
		switch {
		case h.OVN != nil:
			what = fmt.Sprintf("OVN %s %s on %s", h.OVN.Op, h.OVN.Route.Prefix, h.OVN.Route.Router)
		case h.Kernel != nil && h.Kernel.Route != nil:
			what = fmt.Sprintf("kernel %s %s in table %d", h.Kernel.Op, h.Kernel.Route.Prefix, h.Kernel.Route.Table)
		}
		fmt.Fprintf(&b, "held: %s: %s\n", what, h.Reason)
	}
	return b.String()
}

func ovnLine(target string, op model.OVNOp) string {
	r := op.Route
	return fmt.Sprintf("%s\t%s\t%s port %s\t%s\t%s\t%s", target, op.Op, r.Router, r.OutputPort, r.Prefix, r.NextHop, r.Rule)
}

func kernelLine(target string, op model.KernelOp) string {
	switch {
	case op.Route != nil:
		r := op.Route
		return fmt.Sprintf("%s\t%s\ttable %d%s\t%s%s\t%s\t%s", target, op.Op, r.Table, vrfText(r.VRF), r.Prefix, metricText(r.Metric), nextHopsText(r.NextHops), r.Rule)
	case op.VRF != nil:
		return fmt.Sprintf("%s\t%s\tVRF %s table %d\t\t\t", target+" vrf", op.Op, op.VRF.Name, op.VRF.Table)
	case op.PolicyRule != nil:
		r := op.PolicyRule
		return fmt.Sprintf("%s\t%s\tip rule %d from %s lookup %d\t\t\t%s", target+" rule", op.Op, r.Priority, r.Src, r.Table, r.Rule)
	}
	return target + "\t" + string(op.Op)
}

// metricText is " metric N" for a kernel route with a metric, "" for the
// kernel's default.
func metricText(m uint32) string {
	if m == 0 {
		return ""
	}
	return fmt.Sprintf(" metric %d", m)
}
