package cmd

import (
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// api.DefaultDrainWait is how long a drain keeps the routes tagged before it
// withdraws them, when --wait is not given.

func newDrainCommand(o *options) *cobra.Command {
	var peer string
	var wait time.Duration
	c := &cobra.Command{
		Use:   "drain [--peer P] [--wait D]",
		Short: "Drain this node (root): GRACEFUL_SHUTDOWN on every advertisement, then withdraw after --wait",
		Long: `drain tags every advertisement to the peer (--peer) or to every peer with the
GRACEFUL_SHUTDOWN community (RFC 8326, 65535:0), and with LOCAL_PREF 0 on iBGP sessions, so
that the peers move traffic to other nodes; after --wait (default 30s) it withdraws them all.
--wait 0 withdraws at once. The drain is kept in stateDir/drain.json: a restarted daemon stays
drained and withdraws at the same deadline. Draining again keeps the first time and can only
bring the withdraw nearer (a shorter --wait), never put it off. 'ovnbgp undrain' ends it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wait < 0 {
				return fmt.Errorf("--wait %s is negative: give 0 to withdraw at once, or how long to keep the routes tagged (e.g. 30s)", wait)
			}
			st, err := api.NewClient(o.socket).Drain(cmd.Context(), peer, wait)
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, st, func(w *tabwriter.Writer) { drainTable(w, st) })
		},
	}
	c.Flags().StringVar(&peer, "peer", "", "drain only this peer (default: every peer)")
	c.Flags().DurationVar(&wait, "wait", api.DefaultDrainWait, "keep the routes tagged this long, then withdraw them (0 = at once)")
	_ = c.RegisterFlagCompletionFunc("peer", o.completePeers)
	return c
}

func newUndrainCommand(o *options) *cobra.Command {
	var peer string
	c := &cobra.Command{
		Use:   "undrain [--peer P]",
		Short: "End a drain (root): the normal advertisements go out again at once",
		Long: `undrain ends the drain of the peer (--peer) or of everything: the peers get the
normal advertisements (no GRACEFUL_SHUTDOWN) at once, and stateDir/drain.json is updated or
removed. A peer drained by 'ovnbgp drain' without --peer is undrained with every peer only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := api.NewClient(o.socket).Undrain(cmd.Context(), peer)
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, st, func(w *tabwriter.Writer) { drainTable(w, st) })
		},
	}
	c.Flags().StringVar(&peer, "peer", "", "undrain only this peer (default: everything)")
	_ = c.RegisterFlagCompletionFunc("peer", o.completePeers)
	return c
}

// drainTable lists the drained peers, or says none is, and the orders
// kept for peers no longer configured.
func drainTable(w *tabwriter.Writer, st api.DrainStatus) {
	var stale []model.DrainedPeer
	for _, o := range st.Orders {
		if o.Peer != "" && !slices.ContainsFunc(st.Peers, func(p api.DrainedPeer) bool { return p.Peer == o.Peer }) {
			stale = append(stale, o)
		}
	}
	switch {
	case len(st.Peers) == 0 && len(stale) == 0:
		fmt.Fprintf(w, "not drained (%s absent)\n", st.File)
	case len(st.Peers) == 0:
		fmt.Fprintln(w, "no configured peer is drained")
	default:
		row(w, "PEER", "DRAIN", "SINCE", "WITHDRAW")
		for _, p := range st.Peers {
			row(w, p.Peer, p.Phase, p.Since.Local().Format(time.RFC3339), withdrawText(p, st.Now))
		}
	}
	for _, o := range stale {
		fmt.Fprintf(w, "order kept in %s for peer %s, which is not configured (drains nothing): `ovnbgp undrain --peer %s` removes it\n", st.File, o.Peer, o.Peer)
	}
}

// withdrawText says when a drained peer's advertisements go, or went.
func withdrawText(p api.DrainedPeer, now time.Time) string {
	at := p.WithdrawAt.Local().Format(time.RFC3339)
	if now.Before(p.WithdrawAt) {
		return fmt.Sprintf("at %s (in %s)", at, p.WithdrawAt.Sub(now).Round(time.Second))
	}
	return "withdrawn at " + at
}
