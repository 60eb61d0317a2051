package cmd

import (
	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/daemon"
)

func newDaemonCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "daemon",
		Short: "Run the daemon (systemd Type=notify; SIGHUP reloads the config)",
		Long: `Run ovnbgp in the foreground: connect to the OVN Northbound DB, peer with the configured
BGP routers and advertise what the config selects. It tells systemd READY after the first
reconcile. SIGHUP re-reads --config; a config that does not validate is logged and the
running one kept. SIGTERM stops cleanly; with bgp.gracefulRestart.enabled, peers are not
sent a NOTIFICATION and keep the routes while ovnbgp restarts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return daemon.Run(cmd.Context(), daemon.Options{ConfigPath: o.configPath, Version: versionString()})
		},
	}
}
