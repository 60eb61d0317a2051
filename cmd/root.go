// Package cmd holds ovnbgp's command line: one file per noun, cobra
// commands built from an options struct that is passed down (no global flag
// state). The verbs that show or change the daemon's state talk to it over
// its control socket (package api); daemon, doctor, lab, config and version
// work without one. The verbs are a contract: docs/architecture.md, "CLI
// verbs".
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// options are the global flags, shared by every command.
type options struct {
	configPath string
	socket     string
	output     string
	stdout     io.Writer
}

// Default paths of the CLI contract.
const (
	DefaultConfig = "/etc/ovnbgp/config.yaml"
	DefaultSocket = "/run/ovnbgp/ovnbgp.sock"
)

// fromEnv lets OVNBGP_CONFIG, OVNBGP_SOCKET and OVNBGP_OUTPUT stand in for
// flags that were not given (a flag on the command line wins). The viper
// instance is local: nothing outlives the command.
func (o *options) fromEnv(flags *pflag.FlagSet) error {
	v := viper.New()
	v.SetEnvPrefix("OVNBGP")
	v.AutomaticEnv()
	for _, name := range []string{"config", "socket", "output"} {
		if err := v.BindPFlag(name, flags.Lookup(name)); err != nil {
			return err
		}
	}
	o.configPath, o.socket, o.output = v.GetString("config"), v.GetString("socket"), v.GetString("output")
	return nil
}

// Execute runs the command line and exits non-zero on error. SIGINT or
// SIGTERM cancels the command's context, which every blocking step honours
// (the daemon stops cleanly); a second one exits at once.
func Execute() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go onSignals(sigs, cancel, os.Stderr, os.Exit)
	err := NewRootCommand(os.Stdout).ExecuteContext(ctx)
	signal.Stop(sigs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ovnbgp:", err)
		var ee exitError
		var se signalError
		switch {
		case errors.As(err, &ee):
			os.Exit(ee.code)
		case errors.As(context.Cause(ctx), &se):
			os.Exit(se.exitCode())
		}
		os.Exit(1)
	}
}

// signalError is the cause of a command cancelled by a signal. A command
// it ends exits with the shell's code for the signal: 130 for SIGINT, 143
// for SIGTERM. `ovnbgp daemon` is the exception: a signal is its normal
// stop, and it exits 0.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return "interrupted by " + signalName(e.sig) }

func (e signalError) exitCode() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// onSignals cancels the command at the first signal, with a cause that
// names it, and exits at the second.
func onSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, stderr io.Writer, exit func(int)) {
	sig := <-sigs
	cancel(signalError{sig})
	sig = <-sigs
	fmt.Fprintf(stderr, "ovnbgp: second %s: exiting at once\n", signalName(sig))
	exit(signalError{sig}.exitCode())
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// interruptible runs f, a step that may block without a context (reading a
// file), and gives up when ctx ends; f's goroutine then ends with the
// process.
func interruptible[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%s: %w", what, context.Cause(ctx))
	}
}

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// NewRootCommand builds the ovnbgp command tree writing to stdout.
func NewRootCommand(stdout io.Writer) *cobra.Command {
	o := &options{stdout: stdout}
	root := &cobra.Command{
		Use:   "ovnbgp",
		Short: "BGP for OVN-Kubernetes nodes: advertise pod subnets, import provider routes, explain it all",
		Long: `ovnbgp runs on every OVN-Kubernetes node. It advertises what the cluster owns on the node
(pod subnets of the default network and of User Defined Networks) to the provider's BGP
routers, learned from the OVN Northbound DB, and shows what it does and why.

Start with 'ovnbgp lab' for a self-contained demo.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.fromEnv(cmd.Root().PersistentFlags()); err != nil {
				return err
			}
			return checkOutput(o.output)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.configPath, "config", DefaultConfig, "config file (env OVNBGP_CONFIG)")
	pf.StringVar(&o.socket, "socket", DefaultSocket, "daemon control socket (env OVNBGP_SOCKET)")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml (env OVNBGP_OUTPUT)")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))

	root.AddCommand(
		newDaemonCommand(o),
		newPeersCommand(o),
		newRoutesCommand(o),
		newPlanCommand(o),
		newApplyCommand(o),
		newDrainCommand(o),
		newUndrainCommand(o),
		newReloadCommand(o),
		newExplainCommand(o),
		newStatusCommand(o),
		newConfigCommand(o),
		newDoctorCommand(o),
		newVersionCommand(o),
		newLabCommand(o),
		newGendocsCommand(),
	)
	return root
}
