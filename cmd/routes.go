package cmd

import (
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
	var peer string
	var rejected bool
	advertised := &cobra.Command{
		Use:   "advertised",
		Short: "What each peer is sent, with the rule and OVN object behind each prefix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			advs, err := api.NewClient(o.socket).Advertised(cmd.Context(), peer)
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, advs, func(w *tabwriter.Writer) { advertisedTable(w, advs) })
		},
	}
	advertised.Flags().StringVar(&peer, "peer", "", "only this peer")
	learned := &cobra.Command{
		Use:   "learned",
		Short: "What peers sent: accepted, or rejected with the reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			paths, err := api.NewClient(o.socket).Learned(cmd.Context(), peer, rejected)
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, paths, func(w *tabwriter.Writer) { learnedTable(w, paths) })
		},
	}
	learned.Flags().StringVar(&peer, "peer", "", "only this peer")
	learned.Flags().BoolVar(&rejected, "rejected", false, "only paths that no import rule accepts")
	for _, c := range []*cobra.Command{advertised, learned} {
		_ = c.RegisterFlagCompletionFunc("peer", o.completePeers)
	}
	routes.AddCommand(advertised, learned)
	return routes
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
	row(w, "PEER", "PREFIX", "NETWORK", "RULE", "ATTRIBUTES", "SOURCE")
	for _, a := range advs {
		row(w, a.Peer, a.Prefix, dash(a.Network), dash(a.Rule), dash(attrString(a.Attrs)), dash(a.Source))
	}
}

func attrString(a model.PathAttrs) string {
	var parts []string
	if len(a.Communities) > 0 {
		parts = append(parts, "communities="+strings.Join(model.Strings(a.Communities), ","))
	}
	if len(a.LargeCommunities) > 0 {
		parts = append(parts, "large="+strings.Join(model.Strings(a.LargeCommunities), ","))
	}
	if a.LocalPreference != 0 {
		parts = append(parts, "localpref="+strconv.FormatUint(uint64(a.LocalPreference), 10))
	}
	if a.MED != 0 {
		parts = append(parts, "med="+strconv.FormatUint(uint64(a.MED), 10))
	}
	if a.ASPathPrepend != 0 {
		parts = append(parts, "prepend="+strconv.Itoa(int(a.ASPathPrepend)))
	}
	return strings.Join(parts, " ")
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
