package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// maxPlanFile bounds a saved plan read by apply.
const maxPlanFile = 256 << 20

func newPlanCommand(o *options) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "plan [--config NEW] [--out FILE]",
		Short: "Every OVN and kernel change ovnbgp would make now, or with a new config",
		Long: `plan shows every change the daemon would make now: OVN static routes, kernel routes and
VRFs, and advertisements, with counts. It is the daemon's next pass: the operations of import
rules in mode manual wait for 'ovnbgp apply'; the others the daemon applies next, exactly as
printed (with import rules the pass is a full diff, so drift no event reported shows too,
and is repaired). Deletes held back by fail static
(until the peer's End-of-RIB or deferralTime) are listed as held.

With --config NEW (root), it shows what the new config file would change instead, and which
peer sessions reloading it would reset ('ovnbgp reload' then resets exactly those). The CLI
reads NEW and sends its text; the daemon parses it (files it names, such as passwordFile,
are read by the daemon). With --out FILE, it saves the plan for 'ovnbgp apply'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := api.NewClient(o.socket)
			var resp api.PlanResponse
			var err error
			if cmd.Flags().Changed("config") {
				// The CLI reads the file and sends its text: the daemon
				// may not see the caller's files (PrivateTmp, ProtectHome).
				path, aerr := filepath.Abs(o.configPath)
				if aerr != nil {
					return aerr
				}
				text, rerr := config.ReadRegularFile(path, config.MaxConfigSize)
				if rerr != nil {
					return fmt.Errorf("plan --config: %w", rerr)
				}
				resp, err = c.PlanConfig(cmd.Context(), path, text)
			} else {
				resp, err = c.Plan(cmd.Context())
			}
			if err != nil {
				return err
			}
			if out != "" {
				if err := savePlan(out, resp.Plan); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "ovnbgp: plan saved to %s; apply it with: ovnbgp apply %s\n", out, out)
			}
			return render(o.stdout, o.output, resp, func(w *tabwriter.Writer) { planTable(w, resp) })
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "save the plan (JSON) to FILE for 'ovnbgp apply'")
	return cmd
}

// savePlan writes p as JSON, readable by root only: it names the cluster's
// routes.
func savePlan(path string, p plan.Plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the plan: %w", err)
	}
	return nil
}

func planTable(w io.Writer, r api.PlanResponse) {
	p := r.Plan
	fmt.Fprintf(w, "plan for node %s at %s\n", cell(p.Node), p.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(w, "%s\n", r.Counts)
	if r.Manual != (plan.Counts{}) {
		fmt.Fprintf(w, "waiting for 'ovnbgp apply' (mode manual): %s\n", r.Manual)
	}
	for _, s := range r.SessionResets {
		fmt.Fprintf(w, "session reset: peer %s (%s)\n", cell(s.Peer), cell(s.Why))
	}
	for _, pr := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", cell(pr))
	}
	if p.Empty() && len(p.Held) == 0 {
		fmt.Fprintln(w, "no changes")
		return
	}
	fmt.Fprintln(w)
	row(w, "TARGET", "OP", "WHERE", "PREFIX", "VIA", "RULE")
	for _, op := range p.OVN {
		row(w, "ovn", op.Op, op.Route.Router, op.Route.Prefix, op.Route.NextHop, dash(op.Route.Rule))
	}
	for _, op := range p.Kernel {
		kernelRow(w, "kernel", op)
	}
	for _, list := range []struct {
		op   string
		advs []model.Advertisement
	}{{"announce", p.Advertise.Announce}, {"change", p.Advertise.Change}, {"withdraw", p.Advertise.Withdraw}} {
		for _, a := range list.advs {
			row(w, "advertise", list.op, "peer "+a.Peer, a.Prefix, "", dash(a.Rule))
		}
	}
	for _, h := range p.Held {
		switch {
		case h.OVN != nil:
			row(w, "ovn (held)", h.OVN.Op, h.OVN.Route.Router, h.OVN.Route.Prefix, h.OVN.Route.NextHop, strings.Join(h.Rules, ","))
		case h.Kernel != nil:
			kernelRow(w, "kernel (held)", *h.Kernel)
		}
		row(w, "", "", "  why: "+h.Reason, "", "", "")
	}
}

func kernelRow(w io.Writer, target string, op model.KernelOp) {
	switch {
	case op.Route != nil:
		row(w, target, op.Op, tableName(op.Route.Table, op.Route.VRF), op.Route.Prefix, nextHops(op.Route.NextHops), dash(op.Route.Rule))
	case op.VRF != nil:
		row(w, target, op.Op, fmt.Sprintf("vrf %s (table %d)", op.VRF.Name, op.VRF.Table), "", "", "")
	case op.PolicyRule != nil:
		row(w, target, op.Op, fmt.Sprintf("ip rule %d from %s lookup %d", op.PolicyRule.Priority, op.PolicyRule.Src, op.PolicyRule.Table), "", "", dash(op.PolicyRule.Rule))
	}
}

func tableName(table uint32, vrf string) string {
	if vrf != "" {
		return fmt.Sprintf("vrf %s (table %d)", vrf, table)
	}
	return fmt.Sprintf("table %d", table)
}

func nextHops(nhs []model.NextHop) string {
	var s []string
	for _, nh := range nhs {
		t := nh.Addr.String()
		if nh.Dev != "" {
			t += " dev " + nh.Dev
		}
		if nh.Weight > 0 {
			t += fmt.Sprintf(" weight %d", nh.Weight) // issue 21
		}
		s = append(s, t)
	}
	return strings.Join(s, ", ")
}

func newApplyCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "apply FILE",
		Short: "Apply a plan saved by 'ovnbgp plan --out' (root); a stale plan changes nothing",
		Long: `apply sends a plan saved by 'ovnbgp plan --out FILE' to the daemon, which applies its OVN
and kernel operations. It changes nothing when the world moved since the plan was made (the
OVN transaction waits on every gateway router and row the plan read; the kernel routes it
touches are checked first): make a new plan then. Advertisements are not part of an apply:
the daemon keeps them current by itself.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := interruptible(cmd.Context(), "read "+args[0], func() ([]byte, error) {
				return config.ReadRegularFile(args[0], maxPlanFile)
			})
			if err != nil {
				return err
			}
			if !json.Valid(data) {
				return fmt.Errorf("%s: not a plan saved by 'ovnbgp plan --out' (not JSON)", args[0])
			}
			res, err := api.NewClient(o.socket).Apply(cmd.Context(), data)
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, res, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "applied: %d OVN and %d kernel operations\n", len(res.OVN), len(res.Kernel))
			})
		},
	}
}

func newExplainCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain PREFIX",
		Short: "Why a prefix (or an address) is or is not imported and advertised, rule by rule",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := api.NewClient(o.socket).Explain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, e, func(w *tabwriter.Writer) { explainTable(w, e) })
		},
	}
}

func explainTable(w io.Writer, e api.Explanation) {
	fmt.Fprintf(w, "%s\n", e.Prefix)
	for _, s := range e.Summary {
		fmt.Fprintf(w, "  %s\n", cell(s))
	}
	if len(e.Learned) > 0 {
		fmt.Fprintln(w)
		row(w, "PEER", "PREFIX", "NEXT HOP", "RULE", "ACCEPTED", "REASON")
		for _, p := range e.Learned {
			row(w, p.Peer, p.Prefix, p.NextHop, dash(p.Rule), p.Accepted, p.Reason)
		}
	}
	if len(e.OVN)+len(e.Kernel) > 0 {
		fmt.Fprintln(w)
		row(w, "INSTALLED", "WHERE", "PREFIX", "VIA", "RULE")
		for _, r := range e.OVN {
			row(w, "ovn", r.Router, r.Prefix, r.NextHop, dash(r.Rule))
		}
		for _, r := range e.Kernel {
			row(w, "kernel", tableName(r.Table, r.VRF)+metricSuffix(r.Metric), r.Prefix, nextHops(r.NextHops), dash(r.Rule))
		}
	}
}
