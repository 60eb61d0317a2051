package cmd

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
)

func newReloadCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Re-read the daemon's config file and apply it, as SIGHUP does (root)",
		Long: `reload makes the daemon re-read its own config file (the one it was started with) and
apply it, exactly as SIGHUP does, and prints the outcome: applied, with the peer sessions it
reset and why, or refused, with the error (the running config is kept; the exit code is 1).

A rule change resets no session. A peer's session is reset only when a key that goes into
the OPEN or onto the TCP connection changed (asn, address, port, sourceAddress, interface,
holdTime, keepaliveTime, families, password, ebgpMultihop, ttlSecurity); maxPrefixes,
connectRetry and passive are applied in place. A change of bgp.asn, routerID, listenPort or
gracefulRestart restarts the speaker: every session resets. 'ovnbgp plan --config NEW'
shows the same list before you reload.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := api.NewClient(o.socket).Reload(cmd.Context())
			if err != nil {
				return err
			}
			if err := render(o.stdout, o.output, r, func(w *tabwriter.Writer) { reloadTable(w, r) }); err != nil {
				return err
			}
			if !r.Applied {
				return exitError{code: 1, err: errors.New("reload refused: the running config is kept")}
			}
			return nil
		},
	}
}

// reloadTable says what a reload did.
func reloadTable(w *tabwriter.Writer, r api.ReloadResult) {
	if !r.Applied {
		fmt.Fprintf(w, "refused: %s not applied; the running config is kept\n", cell(r.Config))
		for _, line := range strings.Split(r.Error, "\n") {
			fmt.Fprintf(w, "error: %s\n", cell(line))
		}
	} else {
		fmt.Fprintf(w, "applied: %s\n", cell(r.Config))
	}
	if r.Applied && len(r.SessionResets) == 0 {
		fmt.Fprintln(w, "no session reset")
	}
	for _, s := range r.SessionResets {
		fmt.Fprintf(w, "session reset: peer %s (%s)\n", cell(s.Peer), cell(s.Why))
	}
	for _, p := range r.Added {
		fmt.Fprintf(w, "peer added: %s\n", cell(p))
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", cell(x))
	}
}
