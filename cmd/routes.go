package cmd

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

func newRoutesCommand(o *options) *cobra.Command {
	routes := &cobra.Command{
		Use:   "routes",
		Short: "Show advertised and learned routes",
	}
	var lo api.ListOptions
	advertised := &cobra.Command{
		Use:   "advertised",
		Short: "What each peer is sent, with the rule and OVN object behind each prefix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			advs, truncated, err := api.NewClient(o.socket).AdvertisedRoutes(cmd.Context(), lo)
			if err != nil {
				return err
			}
			if err := render(o.stdout, o.output, advs, func(w *tabwriter.Writer) { advertisedTable(w, advs) }); err != nil {
				return err
			}
			noteTruncated(cmd, truncated, lo.Limit)
			return nil
		},
	}
	learned := &cobra.Command{
		Use:   "learned",
		Short: "What peers sent: accepted, or rejected with the reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			paths, truncated, err := api.NewClient(o.socket).LearnedRoutes(cmd.Context(), lo)
			if err != nil {
				return err
			}
			if err := render(o.stdout, o.output, paths, func(w *tabwriter.Writer) { learnedTable(w, paths) }); err != nil {
				return err
			}
			noteTruncated(cmd, truncated, lo.Limit)
			return nil
		},
	}
	learned.Flags().BoolVar(&lo.Rejected, "rejected", false, "only paths that no import rule accepts")
	for _, c := range []*cobra.Command{advertised, learned} {
		c.PreRunE = func(*cobra.Command, []string) error {
			if lo.Limit < 0 {
				return fmt.Errorf("--limit %d: want the number of routes to show, 0 or more (0 = all)", lo.Limit)
			}
			return nil
		}
		c.Flags().StringVar(&lo.Peer, "peer", "", "only this peer")
		c.Flags().IntVar(&lo.Limit, "limit", 0, "show at most N routes (0 = all); a note on stderr says when more exist")
		_ = c.RegisterFlagCompletionFunc("peer", o.completePeers)
	}
	routes.AddCommand(advertised, learned, newImportedCommand(o))
	return routes
}

// noteTruncated tells the user, on stderr so that -o json stays valid, that
// the list stopped at --limit.
func noteTruncated(cmd *cobra.Command, truncated bool, limit int) {
	if truncated {
		fmt.Fprintf(cmd.ErrOrStderr(), "ovnbgp: only the first %d routes are shown (--limit %d); more exist\n", limit, limit)
	}
}

// completePeers offers the running daemon's peer names.
func (o *options) completePeers(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	peers, err := api.NewClient(o.socket).Peers(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(peers))
	for _, p := range peers {
		names = append(names, p.Name+"\t"+p.Address.String())
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func advertisedTable(w *tabwriter.Writer, advs []model.Advertisement) {
	row(w, "PEER", "PREFIX", "STATE", "NETWORK", "RULE", "ATTRIBUTES", "SOURCE")
	for _, a := range advs {
		row(w, a.Peer, a.Prefix, advState(a), dash(a.Network), dash(a.Rule), dash(a.Attrs.String()), dash(a.Source))
	}
}

// advState is whether the prefix is on the wire, and why not.
func advState(a model.Advertisement) string {
	s := string(a.State)
	if s == "" {
		s = "-"
	}
	if a.Reason != "" {
		s += " (" + a.Reason + ")"
	}
	if a.Drain != "" {
		s += "; drain: " + a.Drain
	}
	if a.Problem != "" {
		s += "; problem: " + a.Problem
	}
	return s
}

func learnedTable(w *tabwriter.Writer, paths []model.LearnedPath) {
	row(w, "PEER", "PREFIX", "NEXT HOP", "AS PATH", "AGE", "VERDICT")
	for _, p := range paths {
		as := make([]string, len(p.ASPath))
		for i, n := range p.ASPath {
			as[i] = strconv.FormatUint(uint64(n), 10)
		}
		verdict := "rejected: " + p.Reason
		if p.Accepted {
			verdict = "accepted: " + p.Reason
		}
		row(w, p.Peer, p.Prefix, p.NextHop, dash(strings.Join(as, " ")), ago(p.Age), verdict)
	}
}

func newImportedCommand(o *options) *cobra.Command {
	var network string
	cmd := &cobra.Command{
		Use:   "imported",
		Short: "What is programmed in OVN and in the kernel, by which rule, and any drift",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			imp, err := api.NewClient(o.socket).Imported(cmd.Context(), network)
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, imp, func(w *tabwriter.Writer) { importedTable(w, imp) })
		},
	}
	cmd.Flags().StringVar(&network, "network", "", "only this OVN network")
	return cmd
}

func importedTable(w *tabwriter.Writer, imp api.Imported) {
	row(w, "TARGET", "WHERE", "PREFIX", "VIA", "RULE", "STATE", "REASON")
	for _, r := range imp.OVN {
		row(w, "ovn", r.Router, r.Prefix, r.NextHop, dash(r.Rule), r.State, dash(r.Reason))
	}
	for _, r := range imp.Kernel {
		row(w, "kernel", tableName(r.Table, r.VRF)+metricSuffix(r.Metric), r.Prefix, nextHops(r.NextHops), dash(r.Rule), r.State, dash(r.Reason))
	}
}

// metricSuffix is " metric N" for a kernel route with a metric (issue
// 21), "" for the kernel's default.
func metricSuffix(m uint32) string {
	if m == 0 {
		return ""
	}
	return fmt.Sprintf(" metric %d", m)
}
