package cmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/doctor"
)

func newDoctorCommand(o *options) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Preflight checks of the node (NB, gateway routers, ports, sysctls, VRF, tables, AWS), each with its fix",
		Long: `Check that this node can run ovnbgp, with or without the daemon running: the config, the
OVN Northbound database and this node's gateway routers, OVN-Kubernetes' own route import,
the BGP port, control socket and metrics address, IP forwarding and rp_filter on the uplinks,
the kernel's VRF driver, route protocol and table clashes, and on AWS (found through IMDSv2,
skipped elsewhere) the ENIs' source/destination check and the VPC Route Server quota.

Each check says pass, warn, fail or skip, what it found, and the fix.
Exit code: 0 every check passed or was skipped, 1 a check warned (none failed), 2 a check failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := doctor.Input{ConfigPath: o.configPath, Timeout: timeout}
			cfg, err := interruptible(cmd.Context(), "reading "+o.configPath, func() (*config.Config, error) { return config.Load(o.configPath) })
			if err != nil && cmd.Context().Err() != nil {
				return err
			}
			in.Config, in.ConfigErr = cfg, err
			if cmd.Flags().Changed("socket") || o.socket != DefaultSocket {
				in.Socket = o.socket
			}
			rep := doctor.Run(cmd.Context(), doctor.Host{Root: "/"}, in)
			if err := render(o.stdout, o.output, rep, func(w *tabwriter.Writer) { doctorTable(w, rep) }); err != nil {
				return err
			}
			if rep.ExitCode != 0 {
				return exitError{code: rep.ExitCode, err: fmt.Errorf("doctor: %d failed, %d warnings", rep.Summary[doctor.Fail], rep.Summary[doctor.Warn])}
			}
			return nil
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for NB and for the daemon's socket")
	return c
}

func doctorTable(w *tabwriter.Writer, rep doctor.Report) {
	row(w, "CHECK", "STATUS", "FINDING", "FIX")
	for _, c := range rep.Checks {
		row(w, c.ID, c.Status, c.Finding, dash(c.Fix))
	}
	row(w, "", "", fmt.Sprintf("%d pass, %d warn, %d fail, %d skip", rep.Summary[doctor.Pass], rep.Summary[doctor.Warn], rep.Summary[doctor.Fail], rep.Summary[doctor.Skip]), "")
}
