package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
)

func newConfigCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Validate or show the config",
	}
	validate := &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a config file and list every problem with its key and line",
		Long: `Check a config file and list every problem with its key and line (exit 1). A valid
file may still get warnings (exit 0), e.g. a peer whose address is inside a protected
prefix: its routes with itself as next hop are refused. ovnbgp doctor checks the same
against NB's live values.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := o.configPath
			if len(args) == 1 {
				path = args[0]
			}
			cfg, err := loadConfig(cmd.Context(), path)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(o.stdout, "%s: valid (node %s, AS %d, %d peers, %d advertise rules)\n",
				path, cfg.Node.Name, cfg.BGP.ASN, len(cfg.BGP.Peers), len(cfg.Advertise)); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(o.stdout, "northbound: %s\n", northboundNow(cfg.OVN)); err != nil {
				return err
			}
			// Valid but not what the file probably means: said, not refused.
			for _, w := range cfg.Warnings() {
				w.File = path
				if _, err := fmt.Fprintln(o.stdout, w.Error()); err != nil {
					return err
				}
			}
			return nil
		},
	}
	var running bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the effective config with defaults filled in, secrets redacted",
		Long: `Print the effective config: the --config file with every default filled in, or with
--running the config the daemon runs now. Secrets (TCP MD5 passwords) are never printed.
The table format prints YAML.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v any
			if running {
				raw, err := api.NewClient(o.socket).Config(cmd.Context())
				if err != nil {
					return err
				}
				v = raw
			} else {
				cfg, err := loadConfig(cmd.Context(), o.configPath)
				if err != nil {
					return err
				}
				v = cfg.Redacted()
			}
			format := o.output
			if format == "table" {
				format = "yaml"
			}
			return render(o.stdout, format, v, nil)
		},
	}
	show.Flags().BoolVar(&running, "running", false, "show the daemon's running config (over --socket)")
	c.AddCommand(validate, show)
	return c
}

// northboundNow says how NB is reached with o, looking for the sockets now
// as the daemon does before each attempt (config.NBTarget.Find).
func northboundNow(o config.OVN) string {
	target, err := o.Target()
	if err != nil {
		return err.Error()
	}
	eps, tried := target.Find()
	if target.Source == config.NBConfigured {
		return eps.String() + " (configured)"
	}
	parts := make([]string, len(tried))
	for i, c := range tried {
		parts[i] = c.String()
	}
	if len(eps) == 0 {
		return fmt.Sprintf("no socket found now (discovered: ovn.northbound unset; looked at %s; the daemon keeps looking)", strings.Join(parts, ", "))
	}
	return fmt.Sprintf("%s (discovered: ovn.northbound unset; looked at %s)", eps, strings.Join(parts, ", "))
}

// loadConfig loads and validates path; Ctrl-C ends the wait for a file that
// blocks.
func loadConfig(ctx context.Context, path string) (*config.Config, error) {
	cfg, err := interruptible(ctx, "reading "+path, func() (*config.Config, error) { return config.Load(path) })
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		return nil, exitError{code: 1, err: fmt.Errorf("%s is not valid:\n%w", path, err)}
	}
	return cfg, nil
}
